package io.etserve.security;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * API groups that need a key, as Triton's {@code --http-restricted-api} and
 * {@code --grpc-restricted-protocol}: a request to a restricted group must carry the configured
 * header (HTTP) or metadata key (gRPC) with the configured value, or it is refused (REST 403,
 * gRPC PERMISSION_DENIED) before anything else happens. Both protocols ask this one place.
 */
public final class RestrictedApis {

    /** The protocol's API groups, by Triton's names. */
    public enum Group {
        HEALTH("health"),
        METADATA("metadata"),
        INFERENCE("inference"),
        MODEL_REPOSITORY("model-repository"),
        MODEL_CONFIG("model-config"),
        STATISTICS("statistics"),
        SHARED_MEMORY("shared-memory");

        private final String tritonName;

        Group(String tritonName) {
            this.tritonName = tritonName;
        }

        public String tritonName() {
            return tritonName;
        }

        /** The group of a REST path on the public port, or empty for paths outside the protocol. */
        public static Optional<Group> ofPath(String path) {
            if (path.startsWith("/v2/repository/") || path.equals("/v2/repository")) {
                return Optional.of(MODEL_REPOSITORY);
            }
            if (path.startsWith("/v2/systemsharedmemory/") || path.startsWith("/v2/cudasharedmemory/")) {
                return Optional.of(SHARED_MEMORY);
            }
            if (path.startsWith("/v2/health/")) {
                return Optional.of(HEALTH);
            }
            if (path.startsWith("/v2/models/")) {
                if (path.endsWith("/infer")) {
                    return Optional.of(INFERENCE);
                }
                if (path.endsWith("/config")) {
                    return Optional.of(MODEL_CONFIG);
                }
                if (path.endsWith("/stats")) {
                    return Optional.of(STATISTICS);
                }
                return Optional.of(path.endsWith("/ready") ? HEALTH : METADATA);
            }
            return path.equals("/v2") || path.equals("/v2/") ? Optional.of(METADATA) : Optional.empty();
        }

        /** The group of a method of inference.GRPCInferenceService (its simple name). */
        public static Optional<Group> ofGrpcMethod(String method) {
            return switch (method) {
                case "ServerLive", "ServerReady", "ModelReady" -> Optional.of(HEALTH);
                case "ServerMetadata", "ModelMetadata" -> Optional.of(METADATA);
                case "ModelInfer", "ModelStreamInfer" -> Optional.of(INFERENCE);
                case "ModelConfig" -> Optional.of(MODEL_CONFIG);
                case "ModelStatistics" -> Optional.of(STATISTICS);
                case "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload" -> Optional.of(MODEL_REPOSITORY);
                case "SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
                        "CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister" ->
                        Optional.of(SHARED_MEMORY);
                default -> Optional.empty();
            };
        }
    }

    /** A group's key: the header (HTTP; the gRPC metadata key is the same, lower-cased) and its value. */
    public record Key(String header, String value) {
        public Key {
            if (header == null || header.isBlank() || !header.matches("[A-Za-z0-9-]+")) {
                throw new IllegalArgumentException("a restricted API's header must be a header name, got '" + header + "'");
            }
            if (value == null || value.isEmpty()) {
                throw new IllegalArgumentException("the restricted API header '" + header + "' needs a value");
            }
        }
    }

    private final Map<Group, Key> keys;

    public RestrictedApis(Map<Group, Key> keys) {
        this.keys = keys.isEmpty() ? Map.of() : new EnumMap<>(keys);
    }

    public static RestrictedApis none() {
        return new RestrictedApis(Map.of());
    }

    public boolean restricts(Group group) {
        return keys.containsKey(group);
    }

    public Optional<Key> key(Group group) {
        return Optional.ofNullable(keys.get(group));
    }

    /**
     * Why a request to {@code group} that carries {@code presented} (the header's value, or null)
     * is refused; empty when it may go on. The value is compared in constant time.
     */
    public Optional<String> refusal(Group group, String presented) {
        Key key = keys.get(group);
        if (key == null) {
            return Optional.empty();
        }
        boolean matches = presented != null && MessageDigest.isEqual(presented.getBytes(StandardCharsets.UTF_8),
                key.value().getBytes(StandardCharsets.UTF_8));
        return matches ? Optional.empty() : Optional.of("This API is restricted, expecting header '"
                + key.header().toLowerCase(Locale.ROOT) + "'");
    }
}
