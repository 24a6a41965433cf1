package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.netty.shaded.io.netty.util.ResourceLeakDetector;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Netty's leak detection on the gRPC port: off, unless a system property asks for it. */
class GrpcServerLeakDetectionTest {

    private ResourceLeakDetector.Level before;

    @BeforeEach
    void remember() {
        before = ResourceLeakDetector.getLevel();
    }

    @AfterEach
    void restore() {
        ResourceLeakDetector.setLevel(before);
        for (String property : GrpcServer.LEAK_DETECTION_PROPERTIES) {
            System.clearProperty(property);
        }
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
