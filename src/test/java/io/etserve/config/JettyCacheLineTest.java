package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.Test;

class JettyCacheLineTest {

    @Test
    void aReferenceIsFourBytesExactlyWhenTheJvmCompressesThem() {
        // Asked the way Jetty asks (the JVM's own option), independently of the slot size read.
        boolean compressed = Boolean.parseBoolean(ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class)
                .getVMOption("UseCompressedOops").getValue());
        assertThat(JettyCacheLine.referenceBytes()).isEqualTo(compressed ? 4 : 8);
    }

    @Test
    void referencesPerLineAsJettyComputesThem() {
        assertThat(JettyCacheLine.references(null, 4)).as("compressed: integers per 64-byte line").isEqualTo(16);
        assertThat(JettyCacheLine.references(null, 8)).as("not: longs per line").isEqualTo(8);
        assertThat(JettyCacheLine.references("128", 4)).isEqualTo(32);
        assertThat(JettyCacheLine.references("32", 8)).isEqualTo(4);
        assertThat(JettyCacheLine.references(null, -1)).as("unknown: Jetty asks").isZero();
        assertThat(JettyCacheLine.references("lots", 4)).as("unreadable: Jetty's 64").isEqualTo(16);
        assertThat(JettyCacheLine.references(" 32 ", 4)).as("Jetty does not trim either").isEqualTo(16);
        assertThat(JettyCacheLine.references("2", 4)).isZero();
    }

    @Test
    void aValueTheUserSetStands() {
        String before = System.getProperty(JettyCacheLine.REFERENCES);
        try {
            System.setProperty(JettyCacheLine.REFERENCES, "3");
            JettyCacheLine.preset();
            assertThat(System.getProperty(JettyCacheLine.REFERENCES)).isEqualTo("3");
            System.clearProperty(JettyCacheLine.REFERENCES);
            JettyCacheLine.preset();
            assertThat(System.getProperty(JettyCacheLine.REFERENCES))
                    .isEqualTo(Integer.toString(64 / JettyCacheLine.referenceBytes()));
        } finally {
            if (before == null) {
                System.clearProperty(JettyCacheLine.REFERENCES);
            } else {
                System.setProperty(JettyCacheLine.REFERENCES, before);
            }
        }
    }
}
