package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import io.etserve.cuda.CudaEarlyStart;
import org.junit.jupiter.api.Test;
import org.springframework.context.ApplicationListener;
import org.springframework.core.io.support.SpringFactoriesLoader;
import org.springframework.mock.env.MockEnvironment;

class NettyEarlyInitTest {

    @Test
    void runsUnlessGrpcOrTheEarlyInitIsTurnedOff() {
        assertThat(NettyEarlyInit.wanted(new MockEnvironment())).isTrue();
        assertThat(NettyEarlyInit.wanted(new MockEnvironment().withProperty("etserve.grpc.enabled", "false")))
                .isFalse();
        assertThat(NettyEarlyInit.wanted(new MockEnvironment().withProperty("etserve.grpc.early-init", "false")))
                .isFalse();
    }

    /** Spring Boot makes it (and CUDA's early start) with every application. */
    @Test
    void isRegisteredWithSpringBoot() {
        assertThat(SpringFactoriesLoader.forDefaultResourceLocation().load(ApplicationListener.class))
                .anySatisfy(l -> assertThat(l).isInstanceOf(NettyEarlyInit.class))
                .anySatisfy(l -> assertThat(l).isInstanceOf(CudaEarlyStart.class));
    }

    /** The classes it names are the shaded transport's (a gRPC upgrade that moves them fails here, not silently). */
    @Test
    void initializesTheShadedTransportsClasses() {
        assertThatCode(() -> NettyEarlyInit.initialize(getClass().getClassLoader())).doesNotThrowAnyException();
        assertThat(NettyEarlyInit.CLASSES).allSatisfy(name -> assertThat(name).startsWith("io.grpc.netty.shaded."));
    }
}
