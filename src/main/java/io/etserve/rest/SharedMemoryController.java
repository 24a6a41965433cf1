package io.etserve.rest;

import com.fasterxml.jackson.annotation.JsonProperty;
import io.etserve.inference.InvalidInputException;
import io.etserve.protocol.ControlBodies;
import io.etserve.sharedmemory.SharedMemoryRegions;
import jakarta.servlet.http.HttpServletRequest;
import java.util.Base64;
import java.util.List;
import java.util.function.Supplier;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;
import tools.jackson.databind.JsonNode;

/**
 * Triton's shared-memory extensions over REST: register, unregister and list system and CUDA
 * regions ({@link SharedMemoryRegions}), answered as Triton's are (an empty 200 for a change, a
 * JSON array for a status). A CUDA registration is 501 on a host without a CUDA device.
 *
 * <p>A registration's body is JSON, read as such under the form type too: Triton's C++ client
 * (perf_analyzer's) posts it as libcurl's default, {@code application/x-www-form-urlencoded}.
 */
@RestController
@RequestMapping("/v2")
public class SharedMemoryController {

    private static final String SYSTEM = "/systemsharedmemory";
    private static final String CUDA = "/cudasharedmemory";

    /** A region as Triton's status lists it. */
    record RegionStatus(String name, String key, long offset, @JsonProperty("byte_size") long byteSize) {
        static RegionStatus of(SharedMemoryRegions.Status s) {
            return new RegionStatus(s.name(), s.key(), s.offset(), s.byteSize());
        }
    }

    private final SharedMemoryRegions regions;

    public SharedMemoryController(SharedMemoryRegions regions) {
        this.regions = regions;
    }

    @GetMapping(value = SYSTEM + "/status", produces = MediaType.APPLICATION_JSON_VALUE)
    List<RegionStatus> status() {
        return regions.status().stream().map(RegionStatus::of).toList();
    }

    /** One region, as a list of one (Triton's shape); 404 when it is not registered. */
    @GetMapping(value = SYSTEM + "/region/{region}/status", produces = MediaType.APPLICATION_JSON_VALUE)
    List<RegionStatus> status(@PathVariable("region") String name) {
        return one(() -> RegionStatus.of(regions.status(name)));
    }

    /** Body: {@code {"key": "/object", "offset": 0, "byte_size": N}} (offset optional). 501 while registration is off. */
    @PostMapping(value = SYSTEM + "/region/{region}/register", consumes = {MediaType.APPLICATION_JSON_VALUE,
            MediaType.APPLICATION_OCTET_STREAM_VALUE, MediaType.APPLICATION_FORM_URLENCODED_VALUE},
            produces = MediaType.APPLICATION_JSON_VALUE)
    ResponseEntity<Void> register(@PathVariable("region") String name, HttpServletRequest request) {
        if (!regions.registrationEnabled()) {
            // The answer whatever the body holds.
            throw new ApiException(HttpStatus.NOT_IMPLEMENTED, SharedMemoryRegions.REGISTRATION_OFF);
        }
        JsonNode body = ControlBodies.object(RepositoryController.body(request), "register",
                "{\"key\": \"/object\", \"offset\": 0, \"byte_size\": N}", InvalidInputException::new);
        regions.register(name, key(body), whole(body, "offset", false), whole(body, "byte_size", true));
        return done();
    }

    /** A region not registered is no error (as Triton's); a request using it keeps it until it is done. */
    @PostMapping(value = SYSTEM + "/region/{region}/unregister", produces = MediaType.APPLICATION_JSON_VALUE)
    ResponseEntity<Void> unregister(@PathVariable("region") String name) {
        regions.unregister(name);
        return done();
    }

    @PostMapping(value = SYSTEM + "/unregister", produces = MediaType.APPLICATION_JSON_VALUE)
    ResponseEntity<Void> unregisterAll() {
        regions.unregisterAll();
        return done();
    }

    @GetMapping(value = CUDA + "/status", produces = MediaType.APPLICATION_JSON_VALUE)
    List<CudaRegionStatus> cudaStatus() {
        return regions.cudaStatus().stream().map(CudaRegionStatus::of).toList();
    }

    /** One region, as a list of one; 404 when it is not registered, or registered as system shared memory. */
    @GetMapping(value = CUDA + "/region/{region}/status", produces = MediaType.APPLICATION_JSON_VALUE)
    List<CudaRegionStatus> cudaStatus(@PathVariable("region") String name) {
        return one(() -> CudaRegionStatus.of(regions.cudaStatus(name)));
    }

    /**
     * Body: {@code {"raw_handle": {"b64": "<the IPC handle, base64>"}, "device_id": 0, "byte_size": N}}.
     * 501 while registration is off, and on a host without a CUDA device.
     */
    @PostMapping(value = CUDA + "/region/{region}/register", consumes = {MediaType.APPLICATION_JSON_VALUE,
            MediaType.APPLICATION_OCTET_STREAM_VALUE, MediaType.APPLICATION_FORM_URLENCODED_VALUE},
            produces = MediaType.APPLICATION_JSON_VALUE)
    ResponseEntity<Void> cudaRegister(@PathVariable("region") String name, HttpServletRequest request) {
        try {
            // The answer whatever the body holds.
            regions.requireCudaRegistration();
        } catch (SharedMemoryRegions.RegistrationOffException | SharedMemoryRegions.NoCudaException e) {
            throw new ApiException(HttpStatus.NOT_IMPLEMENTED, e.getMessage());
        }
        JsonNode body = ControlBodies.object(RepositoryController.body(request), "register",
                "{\"raw_handle\": {\"b64\": \"...\"}, \"device_id\": 0, \"byte_size\": N}",
                InvalidInputException::new);
        regions.registerCuda(name, rawHandle(body), whole(body, "device_id", true), whole(body, "byte_size", true));
        return done();
    }

    /** A CUDA region not registered is no error (as Triton's); a request using it keeps it until it is done. */
    @PostMapping(value = CUDA + "/region/{region}/unregister", produces = MediaType.APPLICATION_JSON_VALUE)
    ResponseEntity<Void> cudaUnregister(@PathVariable("region") String name) {
        regions.unregisterCuda(name);
        return done();
    }

    @PostMapping(value = CUDA + "/unregister", produces = MediaType.APPLICATION_JSON_VALUE)
    ResponseEntity<Void> cudaUnregisterAll() {
        regions.unregisterAllCuda();
        return done();
    }

    /** One region's status as a list of one (Triton's shape), or 404 with why there is none. */
    private static <T> List<T> one(Supplier<T> status) {
        try {
            return List.of(status.get());
        } catch (SharedMemoryRegions.UnknownRegionException e) {
            throw new ApiException(HttpStatus.NOT_FOUND, e.getMessage());
        }
    }

    /** Triton's answer to a change: 200, JSON, no body. */
    private static ResponseEntity<Void> done() {
        return ResponseEntity.ok().contentType(MediaType.APPLICATION_JSON).build();
    }

    /** A CUDA region as Triton's status lists it. */
    record CudaRegionStatus(String name, @JsonProperty("device_id") int deviceId,
            @JsonProperty("byte_size") long byteSize) {
        static CudaRegionStatus of(SharedMemoryRegions.CudaStatus s) {
            return new CudaRegionStatus(s.name(), s.deviceId(), s.byteSize());
        }
    }

    private static String key(JsonNode body) {
        JsonNode key = body.get("key");
        if (key == null || key.isNull()) {
            throw new InvalidInputException("Shared memory register request has no 'key' field.");
        }
        if (!key.isString()) {
            throw new InvalidInputException("The register request's 'key' must be a string.");
        }
        return key.asString();
    }

    /** The handle's bytes from {@code {"b64": "..."}}, Triton's form for binary in JSON. */
    private static byte[] rawHandle(JsonNode body) {
        JsonNode handle = body.get("raw_handle");
        if (handle == null || handle.isNull()) {
            throw new InvalidInputException("Shared memory register request has no 'raw_handle' field.");
        }
        JsonNode b64 = handle.get("b64");
        if (!handle.isObject() || b64 == null || !b64.isString()) {
            throw new InvalidInputException("The register request's 'raw_handle' must be {\"b64\": \"<the CUDA IPC"
                    + " handle, base64>\"}.");
        }
        try {
            return Base64.getDecoder().decode(b64.asString());
        } catch (IllegalArgumentException e) {
            throw new InvalidInputException("The register request's 'raw_handle' is not base64: " + e.getMessage());
        }
    }

    private static long whole(JsonNode body, String field, boolean required) {
        JsonNode value = body.get(field);
        if (value == null || value.isNull()) {
            if (required) {
                throw new InvalidInputException("Shared memory register request has no '" + field + "' field.");
            }
            return 0;
        }
        if (!value.isIntegralNumber() || !value.canConvertToLong() || value.longValue() < 0) {
            throw new InvalidInputException("The register request's '" + field + "' must be a whole number,"
                    + " 0 to 2^63 - 1.");
        }
        return value.longValue();
    }
}
