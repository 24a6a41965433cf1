package io.etserve.grpc;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.ServerLiveRequest;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * {@code etserve.grpc.inline-alone-below} as application.yml sets it: calls that end soon, of the
 * port's only connection on its event loop, run there; with more connections than loops some
 * share one, and theirs go to workers. {@code inline-below} is off, so only the alone rule puts
 * calls on a loop. This class's channels are the port's only connections.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class GrpcInlineAloneApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-grpc-alone-")
            .copy(TestPaths.demoModels(), "demo-xnnpack");
    static final Reference REF = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
        r.add("etserve.grpc.inline-below", () -> "0");
        r.add("etserve.grpc.inline-alone-below", () -> "1s");
    }

    @Autowired
    GrpcServer server;

    @Test
    void callsOfTheOnlyConnectionOnItsLoopRunThereAndOfConnectionsSharingOneOnWorkers() throws Exception {
        ManagedChannel alone = channel();
        try {
            var stub = GRPCInferenceServiceGrpc.newBlockingStub(alone).withDeadlineAfter(30, TimeUnit.SECONDS);
            assertThat(stub.serverLive(ServerLiveRequest.getDefaultInstance()).getLive()).isTrue();
            assertThat(server.callsOnEventLoop()).as("not an inference: on a worker").isZero();
            // One call first: a model not called yet has no recent time to go by, and goes to a worker.
            GrpcApiTest.assertMatches(REF, REF.cases().get(0), stub.modelInfer(GrpcApiTest.request("demo-xnnpack",
                    REF.cases().get(0))));
            long before = server.callsOnEventLoop();
            for (Reference.Case c : REF.cases()) {
                GrpcApiTest.assertMatches(REF, c, stub.modelInfer(GrpcApiTest.request("demo-xnnpack", c)));
            }
            assertThat(server.callsOnEventLoop() - before).isEqualTo(REF.cases().size());
        } finally {
            alone.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }

        // More connections than grpc-java has event loops (at most two per core): some share a
        // loop, and their calls go to workers. Were the two settings swapped in the configuration,
        // every call here would be quick and run on its loop.
        int count = 2 * Runtime.getRuntime().availableProcessors() + 1;
        List<ManagedChannel> many = new ArrayList<>();
        try {
            for (int i = 0; i < count; i++) {
                many.add(channel());
                GRPCInferenceServiceGrpc.newBlockingStub(many.get(i)).withDeadlineAfter(30, TimeUnit.SECONDS)
                        .serverLive(ServerLiveRequest.getDefaultInstance());  // connected, all at once
            }
            long before = server.callsOnEventLoop();
            for (ManagedChannel each : many) {
                GrpcApiTest.assertMatches(REF, REF.cases().get(0), GRPCInferenceServiceGrpc.newBlockingStub(each)
                        .withDeadlineAfter(30, TimeUnit.SECONDS)
                        .modelInfer(GrpcApiTest.request("demo-xnnpack", REF.cases().get(0))));
            }
            assertThat(server.callsOnEventLoop() - before).isLessThan(count);
        } finally {
            many.forEach(ManagedChannel::shutdownNow);
        }
    }

    private ManagedChannel channel() {
        return Grpc.newChannelBuilderForAddress("127.0.0.1", server.port(), InsecureChannelCredentials.create()).build();
    }
}
