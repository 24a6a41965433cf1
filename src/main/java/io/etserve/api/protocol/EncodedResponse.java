package io.etserve.api.protocol;

import java.util.OptionalInt;

/**
 * An encoded {@code /infer} response body.
 *
 * @param body the bytes to send: the JSON, followed by binary output data when there is any
 * @param inferenceHeaderContentLength length of the JSON part, for the
 *     {@code Inference-Header-Content-Length} header; present only when binary data follows it
 * @param contentType {@code application/json}, or {@code application/octet-stream} when the
 *     body carries binary data
 */
public record EncodedResponse(byte[] body, OptionalInt inferenceHeaderContentLength, String contentType) {

    public static final String JSON = "application/json";
    public static final String OCTET_STREAM = "application/octet-stream";
}
