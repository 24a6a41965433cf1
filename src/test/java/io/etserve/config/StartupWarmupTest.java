package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The warm-up visits every record the binder builds and runs none of their constructors. */
class StartupWarmupTest {

    static final AtomicInteger constructed = new AtomicInteger();

    /** Records whose constructors count their runs, nested as the configuration's are. */
    public record Outer(Inner inner, List<Element> elements, Map<String, Value> values, int plain) {
        public Outer {
            constructed.incrementAndGet();
        }
    }

    public record Inner(String name) {
        public Inner {
            constructed.incrementAndGet();
        }
    }

    public record Element(long size) {
        public Element {
            constructed.incrementAndGet();
        }
    }

    public record Value(boolean on) {
        public Value {
            constructed.incrementAndGet();
        }
    }

    @Test
    void visitsNestedListAndMapRecordsWithoutConstructingAny() {
        constructed.set(0);
        assertThat(StartupWarmup.prepareConstructors(Outer.class))
                .containsExactlyInAnyOrder(Outer.class, Inner.class, Element.class, Value.class);
        assertThat(constructed).hasValue(0);
        // and each constructor still works afterwards
        assertThat(new Outer(new Inner("a"), List.of(), Map.of(), 1).inner().name()).isEqualTo("a");
        assertThat(constructed).hasValue(2);
    }

    @Test
    void coversTheServicesConfiguration() {
        assertThat(StartupWarmup.prepareConstructors(EtServeProperties.class))
                .contains(EtServeProperties.class, EtServeProperties.Native.class, EtServeProperties.Startup.class,
                        EtServeProperties.Api.Restricted.class);
    }
}
