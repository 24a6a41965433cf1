package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Map;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509TrustManager;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * The service over TLS ({@code server.ssl}, a certificate for {@code localhost} made by the JDK's
 * keytool): by the certificate's name it serves; by IP address Jetty refuses the request (its SNI
 * host check), and the refusal says why instead of a bare "Bad Request".
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class TlsApiTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-tls-")
            .copy(TestPaths.demoModels(), "demo-xnnpack");
    static final Path KEYSTORE = keystore();

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("server.ssl.key-store", () -> KEYSTORE.toString());
        r.add("server.ssl.key-store-password", () -> "changeit");
        r.add("server.ssl.key-store-type", () -> "PKCS12");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    /** A self-signed certificate for localhost, as an operator would make one for a test. */
    private static Path keystore() {
        try {
            Path dir = Files.createTempDirectory("etserve-tls-");
            Path store = dir.resolve("server.p12");
            Process keytool = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "keytool").toString(),
                    "-genkeypair", "-alias", "etserve", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=localhost",
                    "-ext", "SAN=dns:localhost", "-validity", "2", "-storetype", "PKCS12", "-keystore", store.toString(),
                    "-storepass", "changeit").redirectErrorStream(true).start();
            String out = new String(keytool.getInputStream().readAllBytes());
            if (keytool.waitFor() != 0) {
                throw new IllegalStateException("keytool failed: " + out);
            }
            return store;
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Takes the self-signed certificate: the check under test is the server's. */
    private static final X509TrustManager TRUST_ALL = new X509TrustManager() {
        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType) {}

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType) {}

        @Override
        public X509Certificate[] getAcceptedIssuers() {
            return new X509Certificate[0];
        }
    };

    private static HttpClient trustingClient() throws Exception {
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(null, new TrustManager[] {TRUST_ALL}, new SecureRandom());
        return HttpClient.newBuilder().sslContext(tls).version(HttpClient.Version.HTTP_1_1).build();
    }

    @Test
    void byTheCertificatesNameItServesAndByAddressItSaysWhyItRefuses() throws Exception {
        HttpClient client = trustingClient();
        Reference ref = Reference.load(TestPaths.demoModels().resolve("demo-xnnpack/1/reference.json"));
        Reference.Case c = ref.cases().get(0);
        String body = Http.JSON.writeValueAsString(
                Map.of("inputs", c.inputs().stream().map(ProtocolApiTest::jsonInput).toList()));
        HttpResponse<String> byName = client.send(HttpRequest.newBuilder(
                URI.create("https://localhost:" + port + "/v2/models/demo-xnnpack/infer"))
                .POST(HttpRequest.BodyPublishers.ofString(body)).header("Content-Type", "application/json").build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(byName.statusCode()).as(byName.body()).isEqualTo(200);
        // PyTorch's answer at export time
        JsonNode data = Http.JSON.readTree(byName.body()).path("outputs").path(0).path("data");
        List<Double> expected = c.outputs().get(0).data();
        assertThat(data.size()).isEqualTo(expected.size());
        for (int i = 0; i < expected.size(); i++) {
            assertThat(ref.close(data.get(i).asDouble(), expected.get(i))).as("element " + i).isTrue();
        }

        for (String path : new String[] {"/v2/health/ready", "/v2/models/demo-xnnpack/infer"}) {
            String answer = byAddress(path, body);
            assertThat(answer).startsWith("HTTP/1.1 400 ").containsIgnoringCase("Content-Type: application/json")
                    .contains("TLS certificate").contains("connect by a name in the certificate");
        }
    }

    /**
     * A POST to 127.0.0.1 on a TLS socket that checks nothing of the certificate (a client's
     * insecure mode, as curl -k): the JDK's HttpClient would refuse the address itself.
     */
    private String byAddress(String path, String body) throws Exception {
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(null, new TrustManager[] {TRUST_ALL}, new SecureRandom());
        try (SSLSocket socket = (SSLSocket) tls.getSocketFactory().createSocket("127.0.0.1", port)) {
            socket.setSoTimeout(10_000);
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            OutputStream out = socket.getOutputStream();
            out.write(("POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + bytes.length + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(bytes);
            out.flush();
            return new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        }
    }
}
