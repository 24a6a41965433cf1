package io.etserve.protocol;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ControlBodiesTest {

    /** A caller's own exception type: each API answers a bad body with its own status. */
    static final class Refused extends RuntimeException {
        Refused(String message) {
            super(message);
        }
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void noBodyIsNoObjectWhereOneIsOptional() {
        assertThat(ControlBodies.optionalObject(null, "index", Refused::new)).isNull();
        assertThat(ControlBodies.optionalObject(new byte[0], "index", Refused::new)).isNull();
        assertThat(ControlBodies.optionalObject(bytes(" \r\n\t"), "index", Refused::new)).isNull();
    }

    @Test
    void anObjectIsRead() {
        assertThat(ControlBodies.optionalObject(bytes("{\"ready\": true}"), "index", Refused::new)
                .get("ready").booleanValue()).isTrue();
        assertThat(ControlBodies.object(bytes("{\"key\": \"/k\"}"), "register", "{...}", Refused::new)
                .get("key").asString()).isEqualTo("/k");
    }

    @Test
    void badBodiesAreTheCallersRefusalNamingTheRequest() {
        assertThatThrownBy(() -> ControlBodies.optionalObject(bytes("{\"ready\": "), "index", Refused::new))
                .isInstanceOf(Refused.class).hasMessageStartingWith("The index request's body is not valid JSON: ");
        assertThatThrownBy(() -> ControlBodies.optionalObject(bytes("[1, 2]"), "unload", Refused::new))
                .isInstanceOf(Refused.class).hasMessage("The unload request's body must be a JSON object.");
        assertThatThrownBy(() -> ControlBodies.optionalObject(bytes("\"text\""), "load", Refused::new))
                .isInstanceOf(Refused.class).hasMessage("The load request's body must be a JSON object.");
    }

    @Test
    void aRepeatedKeyIsRefused() {
        assertThatThrownBy(() -> ControlBodies.optionalObject(bytes("{\"ready\": true, \"ready\": false}"), "index",
                Refused::new)).isInstanceOf(Refused.class).hasMessageContaining("not valid JSON")
                .hasMessageContaining("ready");
    }

    @Test
    void aRequiredObjectSaysWhatItHolds() {
        String shape = "{\"key\": \"/object\", \"byte_size\": N}";
        String refusal = "The register request's body must be a JSON object: " + shape + ".";
        assertThatThrownBy(() -> ControlBodies.object(new byte[0], "register", shape, Refused::new))
                .isInstanceOf(Refused.class).hasMessage(refusal);
        assertThatThrownBy(() -> ControlBodies.object(bytes("[]"), "register", shape, Refused::new))
                .isInstanceOf(Refused.class).hasMessage(refusal);
    }
}
