package io.etserve.config;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.grpc.GrpcServer;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.NoSuchBeanDefinitionException;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** etserve.grpc.enabled decides whether the gRPC port exists (the port itself: GrpcApiTest). */
class GrpcConfigurationTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withUserConfiguration(GrpcConfiguration.class);

    @Test
    void switchedOffThereIsNoServerAndNoneOfItsCollaboratorsIsNeeded() {
        runner.withPropertyValues("etserve.grpc.enabled=false")
                .run(ctx -> assertThat(ctx).hasNotFailed().doesNotHaveBean(GrpcServer.class));
    }

    @Test
    void onByDefaultSoAContextWithoutTheServiceFailsForWantOfIt() {
        runner.run(ctx -> assertThat(ctx).hasFailed().getFailure()
                .hasRootCauseInstanceOf(NoSuchBeanDefinitionException.class));
    }
}
