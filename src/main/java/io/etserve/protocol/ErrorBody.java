package io.etserve.protocol;

import java.io.ByteArrayOutputStream;
import tools.jackson.core.JsonGenerator;
import tools.jackson.core.ObjectWriteContext;

/** The protocol's error body, {@code {"error": "<message>"}}, with the message JSON-escaped. */
public final class ErrorBody {

    private ErrorBody() {}

    public static byte[] error(String message) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(64 + (message == null ? 0 : message.length()));
        try (JsonGenerator g = ProtocolJson.FACTORY.createGenerator(ObjectWriteContext.empty(), out)) {
            g.writeStartObject();
            g.writeStringProperty("error", message == null ? "unknown error" : message);
            g.writeEndObject();
        }
        return out.toByteArray();
    }
}
