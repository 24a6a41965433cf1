package io.etserve.protocol;

import java.nio.charset.StandardCharsets;
import java.util.function.Function;
import tools.jackson.core.JacksonException;
import tools.jackson.core.StreamReadFeature;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The small JSON bodies of Triton's control calls over REST (the repository's index, load and
 * unload, a shared-memory registration): one JSON object, or for some calls none at all. Read
 * from bytes, as the callers accept them under more than one Content-Type (Triton's clients send
 * none, or libcurl's form type), with a repeated key refused, so a body cannot say two things.
 * Each caller answers a bad body with its own exception, from the message given here.
 */
public final class ControlBodies {

    private static final JsonMapper MAPPER = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();

    private ControlBodies() {}

    /**
     * The body's JSON object, null when there is none (no bytes, or only white space).
     *
     * @param request the call's name in a refusal ({@code "load"}: "The load request's body ...")
     * @param refusal the caller's exception for a message
     */
    public static JsonNode optionalObject(byte[] body, String request, Function<String, RuntimeException> refusal) {
        return read(body, request, "The " + request + " request's body must be a JSON object.", refusal);
    }

    /**
     * The body's JSON object, which must be there.
     *
     * @param shape what the object holds, in the refusal (e.g. {@code {"key": "/object"}})
     */
    public static JsonNode object(byte[] body, String request, String shape,
            Function<String, RuntimeException> refusal) {
        String notAnObject = "The " + request + " request's body must be a JSON object: " + shape + ".";
        JsonNode doc = read(body, request, notAnObject, refusal);
        if (doc == null) {
            throw refusal.apply(notAnObject);
        }
        return doc;
    }

    private static JsonNode read(byte[] body, String request, String notAnObject,
            Function<String, RuntimeException> refusal) {
        if (body == null || new String(body, StandardCharsets.UTF_8).isBlank()) {
            return null;
        }
        JsonNode doc;
        try {
            doc = MAPPER.readTree(body);
        } catch (JacksonException e) {
            throw refusal.apply("The " + request + " request's body is not valid JSON: " + e.getOriginalMessage());
        }
        if (doc == null || !doc.isObject()) {
            throw refusal.apply(notAnObject);
        }
        return doc;
    }
}
