package io.etserve.container;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.testcontainers.DockerClientFactory;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/** The container engine the container tests talk to. */
final class DockerEngine {

    /** docker-java's setting for the API version it speaks (system property or ~/.docker-java.properties). */
    private static final String API_VERSION_PROPERTY = "api.version";
    private static final String DEFAULT_HOST = "unix:///var/run/docker.sock";

    private DockerEngine() {}

    /**
     * True when an engine answers. Testcontainers 2.0.2 speaks API 1.44 unless told otherwise,
     * which Debian 12's engine (20.10, API 1.41) rejects; so unless a version is configured,
     * ask the engine which one it speaks and use that.
     */
    static boolean available() {
        if (System.getProperty(API_VERSION_PROPERTY) == null) {
            engineApiVersion().ifPresent(v -> System.setProperty(API_VERSION_PROPERTY, v));
        }
        return DockerClientFactory.instance().isDockerAvailable();
    }

    static String host() {
        return Optional.ofNullable(System.getenv("DOCKER_HOST")).orElse(DEFAULT_HOST);
    }

    /** The engine's own API version from {@code GET /version}, for a unix socket engine. */
    private static Optional<String> engineApiVersion() {
        String host = host();
        if (!host.startsWith("unix://")) {
            return Optional.empty();
        }
        try (SocketChannel channel = SocketChannel.open(UnixDomainSocketAddress.of(host.substring("unix://".length())))) {
            channel.write(ByteBuffer.wrap("GET /version HTTP/1.0\r\nHost: localhost\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII)));
            ByteArrayOutputStream response = new ByteArrayOutputStream();
            ByteBuffer buffer = ByteBuffer.allocate(8192);
            while (channel.read(buffer) > 0) {
                response.write(buffer.array(), 0, buffer.position());
                buffer.clear();
            }
            String text = response.toString(StandardCharsets.UTF_8);
            int body = text.indexOf("\r\n\r\n");
            if (!text.startsWith("HTTP/1.") || body < 0) {
                return Optional.empty();
            }
            JsonNode version = JsonMapper.builder().build().readTree(text.substring(body + 4)).path("ApiVersion");
            return version.isString() ? Optional.of(version.asString()) : Optional.empty();
        } catch (IOException | RuntimeException e) {
            // No engine there: available() then reports false and the test says how to start one.
            return Optional.empty();
        }
    }
}
