package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.netty.shaded.io.netty.util.ResourceLeakDetector;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Netty's leak detection on the gRPC port: off, unless a system property asks for it. */
class GrpcServerLeakDetectionTest {

    private ResourceLeakDetector.Level before;
    /** The properties as the JVM had them (a run may set one to look for a leak). */
    private final Map<String, String> properties = new HashMap<>();

    @BeforeEach
    void remember() {
        before = ResourceLeakDetector.getLevel();
        for (String property : GrpcServer.LEAK_DETECTION_PROPERTIES) {
            properties.put(property, System.getProperty(property));
            System.clearProperty(property);
        }
    }

    @AfterEach
    void restore() {
        ResourceLeakDetector.setLevel(before);
        properties.forEach((property, value) -> {
            if (value == null) {
                System.clearProperty(property);
            } else {
                System.setProperty(property, value);
            }
        });
    }

    @Test
    void isTurnedOffWhenNobodyAskedForIt() {
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.SIMPLE);

        GrpcServer.leakDetectionOffUnlessAsked();

        assertThat(ResourceLeakDetector.getLevel()).isEqualTo(ResourceLeakDetector.Level.DISABLED);
    }

    @Test
    void staysAsSetWhenEitherPropertyNamesALevel() {
        for (String property : GrpcServer.LEAK_DETECTION_PROPERTIES) {
            ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
            System.setProperty(property, "paranoid");

            GrpcServer.leakDetectionOffUnlessAsked();

            assertThat(ResourceLeakDetector.getLevel()).as(property).isEqualTo(ResourceLeakDetector.Level.PARANOID);
            System.clearProperty(property);
        }
    }

    /** The names are the shaded copy's own: a gRPC upgrade that renames them fails here, not silently. */
    @Test
    void thePropertiesAreTheOnesTheShadedDetectorReads() throws Exception {
        byte[] detector = ResourceLeakDetector.class.getResourceAsStream("ResourceLeakDetector.class").readAllBytes();
        String constants = new String(detector, java.nio.charset.StandardCharsets.ISO_8859_1);
        for (String property : GrpcServer.LEAK_DETECTION_PROPERTIES) {
            assertThat(constants).contains(property);
        }
    }
}
