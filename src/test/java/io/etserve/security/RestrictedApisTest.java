package io.etserve.security;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.security.RestrictedApis.Group;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RestrictedApisTest {

    @Test
    void everyProtocolPathAndMethodBelongsToItsGroup() {
        assertThat(Group.ofPath("/v2/repository/index")).contains(Group.MODEL_REPOSITORY);
        assertThat(Group.ofPath("/v2/repository/models/m/load")).contains(Group.MODEL_REPOSITORY);
        assertThat(Group.ofPath("/v2/health/live")).contains(Group.HEALTH);
        assertThat(Group.ofPath("/v2/models/m/versions/1/ready")).contains(Group.HEALTH);
        assertThat(Group.ofPath("/v2/models/m/infer")).contains(Group.INFERENCE);
        assertThat(Group.ofPath("/v2/models/m")).contains(Group.METADATA);
        assertThat(Group.ofPath("/v2/models/m/versions/1/config")).contains(Group.MODEL_CONFIG);
        assertThat(Group.ofPath("/v2/models/stats")).contains(Group.STATISTICS);
        assertThat(Group.ofPath("/v2/models/m/stats")).contains(Group.STATISTICS);
        assertThat(Group.ofGrpcMethod("ModelConfig")).contains(Group.MODEL_CONFIG);
        assertThat(Group.ofGrpcMethod("ModelStatistics")).contains(Group.STATISTICS);
        assertThat(Group.ofPath("/v2")).contains(Group.METADATA);
        assertThat(Group.ofPath("/actuator/health")).isEmpty();
        assertThat(Group.ofGrpcMethod("RepositoryModelUnload")).contains(Group.MODEL_REPOSITORY);
        assertThat(Group.ofGrpcMethod("ModelInfer")).contains(Group.INFERENCE);
        assertThat(Group.ofGrpcMethod("ModelReady")).contains(Group.HEALTH);
        assertThat(Group.ofGrpcMethod("Check")).isEmpty();
        assertThat(Group.ofPath("/v2/systemsharedmemory/region/r/register")).contains(Group.SHARED_MEMORY);
        assertThat(Group.ofPath("/v2/cudasharedmemory/status")).contains(Group.SHARED_MEMORY);
        assertThat(Group.ofGrpcMethod("SystemSharedMemoryRegister")).contains(Group.SHARED_MEMORY);
        assertThat(Group.ofGrpcMethod("CudaSharedMemoryStatus")).contains(Group.SHARED_MEMORY);
    }

    @Test
    void aRestrictedGroupNeedsItsExactValueAndTheOthersNeedNothing() {
        RestrictedApis apis = new RestrictedApis(Map.of(Group.MODEL_REPOSITORY, new RestrictedApis.Key("Admin-Key", "k")));
        assertThat(apis.refusal(Group.MODEL_REPOSITORY, null)).hasValue("This API is restricted, expecting header 'admin-key'");
        assertThat(apis.refusal(Group.MODEL_REPOSITORY, "K")).isPresent();
        assertThat(apis.refusal(Group.MODEL_REPOSITORY, "k ")).isPresent();
        assertThat(apis.refusal(Group.MODEL_REPOSITORY, "k")).isEmpty();
        assertThat(apis.refusal(Group.INFERENCE, null)).isEmpty();
    }

    @Test
    void aKeyNeedsAHeaderNameAndAValue() {
        assertThatThrownBy(() -> new RestrictedApis.Key("admin key", "k")).hasMessageContaining("header name");
        assertThatThrownBy(() -> new RestrictedApis.Key("admin-key", "")).hasMessageContaining("needs a value");
    }
}
