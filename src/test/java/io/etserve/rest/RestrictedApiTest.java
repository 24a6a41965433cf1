package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.grpc.GrpcServer;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.ModelReadyRequest;
import io.etserve.grpc.protocol.RepositoryIndexRequest;
import io.etserve.grpc.protocol.RepositoryModelLoadRequest;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.RawConnection;
import io.etserve.support.TestPaths;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Repository control restricted to holders of a key ({@code etserve.api.restricted}), as Triton's
 * restricted APIs: over REST and gRPC a request without the header, or with another value, is
 * refused before it does anything; with it, it works; the open groups stay open.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class RestrictedApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-restricted-")
            .copy(TestPaths.demoModels(), "demo-xnnpack");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.repository.mode", () -> "explicit");
        r.add("etserve.api.restricted.model-repository.header", () -> "Admin-Key");
        r.add("etserve.api.restricted.model-repository.value", () -> "s3cret");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    GrpcServer grpc;

    private HttpResponse<String> post(String path, String header, String value) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString("{}"));
        if (header != null) {
            b.header(header, value);
        }
        return HttpClient.newHttpClient().send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void aPathWithAParameterOrAnEscapeIsRefusedNotRoutedPastTheRestriction() throws Exception {
        // Spring MVC would route each of these to the repository controller (or to inference),
        // decoded and without ';x', while the restriction read the path as sent.
        for (String path : new String[] {"/v2/repository;x/index", "/v2/%72epository/index", "/v2;x/repository/index",
                "/v2/repository/models/demo-xnnpack;x/unload", "/v2/models/demo-xnnpack/infer;jsessionid=abc",
                "/v2/models/demo-xnnpack/inf%65r"}) {
            HttpResponse<String> refused = post(path, null, null);
            assertThat(refused.statusCode()).as(path).isEqualTo(400);
            assertThat(refused.body()).as(path).contains("the path must not contain ';' or escape a letter");
        }
        // An escape no protocol word is made of (a name in another script) still gets its 404.
        HttpResponse<String> snowman = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + port + "/v2/models/%E2%98%83/ready")).build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(snowman.statusCode()).isEqualTo(404);
        assertThat(Http.local(port).get("/v2/models/demo-xnnpack/ready").status()).isEqualTo(200);
    }

    @Test
    void restWithoutTheKeyIsRefusedWithTheHeaderItNeeds() throws Exception {
        for (String path : new String[] {"/v2/repository/index", "/v2/repository/models/demo-xnnpack/load",
                "/v2/repository/models/demo-xnnpack/unload"}) {
            HttpResponse<String> none = post(path, null, null);
            assertThat(none.statusCode()).as(path).isEqualTo(403);
            assertThat(none.body()).as(path).contains("\"error\"").contains("expecting header 'admin-key'")
                    .doesNotContain("s3cret");
            assertThat(post(path, "admin-key", "wrong").statusCode()).as(path).isEqualTo(403);
        }
        // The model is still there: the refused unload did nothing.
        assertThat(Http.local(port).get("/v2/models/demo-xnnpack/ready").status()).isEqualTo(200);
    }

    /** A refusal whose body came after its head: read, so the connection carries the next request. */
    @Test
    void aRefusedRequestKeepsItsConnectionUsable() throws Exception {
        String request = RawConnection.post("/v2/repository/models/m/load", "{\"parameters\":{}}");
        int split = request.indexOf("\r\n\r\n") + 4;
        try (RawConnection c = RawConnection.open(port, 10_000)) {
            c.send(request.substring(0, split));
            Thread.sleep(200);  // the head alone has arrived and is being refused
            c.send(request.substring(split));
            assertThat(c.read().status()).isEqualTo(403);
            assertThat(c.exchange("GET /v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status())
                    .as("the next request on the connection").isEqualTo(200);
        }
    }

    @Test
    void restWithTheKeyWorksAndOpenGroupsStayOpen() throws Exception {
        HttpResponse<String> index = post("/v2/repository/index", "ADMIN-KEY", "s3cret");
        assertThat(index.statusCode()).as(index.body()).isEqualTo(200);
        assertThat(index.body()).contains("demo-xnnpack");
        assertThat(post("/v2/repository/models/demo-xnnpack/load", "Admin-Key", "s3cret").statusCode()).isEqualTo(200);
        Http http = Http.local(port);
        assertThat(http.get("/v2/health/ready").status()).isEqualTo(200);
        assertThat(http.get("/v2/models/demo-xnnpack").status()).isEqualTo(200);
        assertThat(http.post("/v2/models/demo-xnnpack/infer", SlowClientsApiTest.demoRequest()).status()).isEqualTo(200);
    }

    @Test
    void grpcWithoutTheKeyIsPermissionDeniedAndWithItWorks() throws Exception {
        ManagedChannel channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpc.port(),
                InsecureChannelCredentials.create()).build();
        try {
            var stub = GRPCInferenceServiceGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS);
            assertThatThrownBy(() -> stub.repositoryIndex(RepositoryIndexRequest.getDefaultInstance()))
                    .isInstanceOfSatisfying(StatusRuntimeException.class, e -> {
                        assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.PERMISSION_DENIED);
                        assertThat(e.getStatus().getDescription()).contains("admin-key");
                    });
            Metadata wrong = new Metadata();
            wrong.put(Metadata.Key.of("admin-key", Metadata.ASCII_STRING_MARSHALLER), "wrong");
            assertThatThrownBy(() -> stub.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(wrong))
                    .repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("demo-xnnpack").build()))
                    .isInstanceOfSatisfying(StatusRuntimeException.class,
                            e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.PERMISSION_DENIED));
            Metadata key = new Metadata();
            key.put(Metadata.Key.of("admin-key", Metadata.ASCII_STRING_MARSHALLER), "s3cret");
            var keyed = stub.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(key));
            assertThat(keyed.repositoryIndex(RepositoryIndexRequest.getDefaultInstance()).getModelsList()).isNotEmpty();
            // Health is an open group.
            assertThat(stub.modelReady(ModelReadyRequest.newBuilder().setName("demo-xnnpack").build()).getReady()).isTrue();
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }
}
