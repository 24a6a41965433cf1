package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.grpc.GrpcServer;
import io.etserve.grpc.protocol.GRPCInferenceServiceGrpc;
import io.etserve.grpc.protocol.ModelConfigRequest;
import io.etserve.grpc.protocol.ModelRepositoryParameter;
import io.etserve.grpc.protocol.ModelStatisticsRequest;
import io.etserve.grpc.protocol.RepositoryModelLoadRequest;
import io.etserve.grpc.protocol.ServerMetadataRequest;
import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import io.etserve.triton.TritonJson;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import tools.jackson.databind.JsonNode;

/**
 * Triton's model configuration and statistics extensions and the load with a configuration,
 * over real HTTP and gRPC on the real runtime. Expected values come from the models' config.yml
 * files and the PyTorch references, and statistics are compared with the Prometheus series.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class TritonExtensionsApiTest {

    static final String DIMS = "inputs: [ { name: x, dims: [-1, 16] } ]\noutputs: [ { name: y } ]\n";
    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-triton-ext-")
            .copy(TestPaths.demoModels(), "demo-portable")
            .copy(TestPaths.demoModels(), "demo-portable", "counted")
            .copy(TestPaths.testModels(), "dynamic-batch", "batched")
            .withFile("batched/config.yml", DIMS + "instances: 2\ndynamic-batching:\n  max-batch-size: 8\n"
                    + "  max-queue-delay: 500us\n  preferred-batch-sizes: [4, 8]\n")
            .copy(TestPaths.testModels(), "dynamic-batch", "plain")
            .withFile("plain/config.yml", DIMS + "instances: 1\nversion-policy: { latest: 1 }\n");

    static final Reference DEMO = Reference.load(TestPaths.demoModels().resolve("demo-portable/1/reference.json"));
    static final Reference BATCH = Reference.load(TestPaths.testModels().resolve("dynamic-batch/1/reference.json"));

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("etserve.repository.mode", () -> "explicit");
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Value("${local.management.port}")
    int managementPort;

    @Autowired
    GrpcServer grpcServer;

    Http http;
    ManagedChannel channel;
    GRPCInferenceServiceGrpc.GRPCInferenceServiceBlockingStub grpc;

    @BeforeEach
    void clients() {
        http = Http.local(port);
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", grpcServer.port(), InsecureChannelCredentials.create())
                .build();
        grpc = GRPCInferenceServiceGrpc.newBlockingStub(channel);
    }

    @AfterEach
    void close() {
        channel.shutdownNow();
    }

    JsonNode get(String path) {
        Http.Response r = http.get(path);
        assertThat(r.status()).as(path + ": " + r.text()).isEqualTo(200);
        return r.json();
    }

    static List<Long> longs(JsonNode array) {
        List<Long> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asLong()));
        return out;
    }

    static List<Long> shape(Reference.TensorValue t) {
        List<Long> out = new ArrayList<>();
        for (long d : t.shape()) {
            out.add(d);
        }
        return out;
    }

    String infer(String model, Reference.TensorValue input) {
        return "{\"inputs\":[" + input.json() + "]}";
    }

    Http.Response load(String model, String config) {
        String body = config == null ? "{}"
                : Http.JSON.writeValueAsString(Map.of("parameters", Map.of("config", config)));
        return http.post("/v2/repository/models/" + model + "/load", body);
    }

    @Test
    void serverMetadataListsTheExtensionsThatExist() {
        assertThat(longsOrStrings(get("/v2").path("extensions"))).containsExactlyInAnyOrder("binary_tensor_data",
                "model_repository", "model_configuration", "statistics", "system_shared_memory");
        assertThat(grpc.serverMetadata(ServerMetadataRequest.getDefaultInstance())
                .getExtensionsList()).isEqualTo(longsOrStrings(get("/v2").path("extensions")));
    }

    static List<String> longsOrStrings(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asString()));
        return out;
    }

    @Test
    void aModelThatDoesNotBatchReportsEveryDimensionAndItsInstances() {
        JsonNode c = get("/v2/models/demo-portable/config");
        assertThat(c.path("name").asString()).isEqualTo("demo-portable");
        assertThat(c.path("platform").asString()).isEqualTo("executorch");
        assertThat(c.path("max_batch_size").asInt(-1)).isZero();
        Reference.TensorValue x = DEMO.cases().get(0).inputs().get(0);
        Reference.TensorValue y = DEMO.cases().get(0).outputs().get(0);
        assertThat(c.path("input")).hasSize(1);
        assertThat(c.path("input").get(0).path("name").asString()).isEqualTo(x.name());
        assertThat(c.path("input").get(0).path("data_type").asString()).isEqualTo("TYPE_" + x.datatype());
        assertThat(longs(c.path("input").get(0).path("dims"))).isEqualTo(shape(x));
        assertThat(c.path("input").get(0).path("is_shape_tensor").isBoolean()).isTrue();
        assertThat(c.path("input").get(0).path("optional").asBoolean(true)).isFalse();
        assertThat(c.path("output").get(0).path("name").asString()).isEqualTo(y.name());
        assertThat(longs(c.path("output").get(0).path("dims"))).isEqualTo(shape(y));
        // config.yml: instances: 2, on the CPU (no CUDA device here)
        assertThat(c.path("instance_group")).hasSize(1);
        assertThat(c.path("instance_group").get(0).path("kind").asString()).isEqualTo("KIND_CPU");
        assertThat(c.path("instance_group").get(0).path("count").asInt()).isEqualTo(2);
        assertThat(c.has("dynamic_batching")).isFalse();
        assertThat(c.has("sequence_batching")).isFalse();
        assertThat(c.path("model_transaction_policy").path("decoupled").isBoolean()).isTrue();
        assertThat(c.path("model_transaction_policy").path("decoupled").asBoolean()).isFalse();
        assertThat(c.path("response_cache").path("enable").asBoolean(true)).isFalse();
        assertThat(c.path("version_policy").has("all")).isTrue();
        // every config tensor name is in the metadata (perf_analyzer's check)
        JsonNode meta = get("/v2/models/demo-portable");
        assertThat(meta.path("inputs").get(0).path("name").asString()).isEqualTo(x.name());
        assertThat(get("/v2/models/demo-portable/versions/1/config")).isEqualTo(c);
    }

    @Test
    void aBatchedModelReportsItsBatcherAndLeavesTheBatchDimensionOut() {
        JsonNode c = get("/v2/models/batched/config");
        assertThat(c.path("max_batch_size").asInt()).isEqualTo(8);
        assertThat(longs(c.path("input").get(0).path("dims"))).containsExactly(16L);
        assertThat(c.path("dynamic_batching").path("max_queue_delay_microseconds").isIntegralNumber()).isTrue();
        assertThat(c.path("dynamic_batching").path("max_queue_delay_microseconds").asLong()).isEqualTo(500);
        assertThat(longs(c.path("dynamic_batching").path("preferred_batch_size"))).containsExactly(4L, 8L);
        // perf_analyzer: with max_batch_size > 0 the first metadata dimension is the batch
        JsonNode meta = get("/v2/models/batched");
        assertThat(longs(meta.path("inputs").get(0).path("shape"))).containsExactly(-1L, 16L);
    }

    @Test
    void unknownModelsAndVersionsAre404() {
        assertThat(http.get("/v2/models/no-such/config").status()).isEqualTo(404);
        assertThat(http.get("/v2/models/demo-portable/versions/7/config").status()).isEqualTo(404);
        assertThat(http.get("/v2/models/no-such/stats").status()).isEqualTo(404);
        assertThat(http.get("/v2/models/demo-portable/versions/7/stats").status()).isEqualTo(404);
        StatusRuntimeException e = Assertions.assertThrows(StatusRuntimeException.class,
                () -> grpc.modelConfig(ModelConfigRequest.newBuilder().setName("no-such").build()));
        assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.NOT_FOUND);
    }

    /** One Prometheus sample of {@code name} for model {@code model} version 1 (labels in Prometheus' order). */
    static double sample(String prom, String name, String model) {
        Matcher m = Pattern.compile("(?m)^" + name + "\\{model=\"" + model + "\",version=\"1\"} (\\S+)$").matcher(prom);
        assertThat(m.find()).as(name + " of " + model).isTrue();
        return Double.parseDouble(m.group(1));
    }

    static double failures(String prom, String model) {
        Matcher m = Pattern.compile("(?m)^nv_inference_request_failure\\{model=\"" + model
                + "\",reason=\"[A-Z]+\",version=\"1\"} (\\S+)$").matcher(prom);
        double sum = 0;
        while (m.find()) {
            sum += Double.parseDouble(m.group(1));
        }
        return sum;
    }

    @Test
    void statisticsCountWhatRanAndAgreeWithThePrometheusSeries() {
        long before = System.currentTimeMillis();
        Reference.TensorValue x = DEMO.cases().get(0).inputs().get(0);
        for (int i = 0; i < 5; i++) {
            assertThat(http.post("/v2/models/counted/infer", infer("counted", x)).status()).isEqualTo(200);
        }
        String wrongShape = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,8],\"data\":[0,0,0,0,0,0,0,0]}]}";
        assertThat(http.post("/v2/models/counted/infer", wrongShape).status()).isEqualTo(400);
        long after = System.currentTimeMillis();

        JsonNode all = get("/v2/models/counted/stats").path("model_stats");
        assertThat(all).hasSize(1);
        JsonNode s = all.get(0);
        assertThat(s.path("name").asString()).isEqualTo("counted");
        assertThat(s.path("version").isString()).isTrue();
        assertThat(s.path("version").asString()).isEqualTo("1");
        assertThat(s.path("last_inference").asLong()).isBetween(before, after);
        assertThat(s.path("inference_count").asLong()).isEqualTo(5);
        assertThat(s.path("execution_count").asLong()).isEqualTo(5);
        JsonNode st = s.path("inference_stats");
        assertThat(st.path("success").path("count").asLong()).isEqualTo(5);
        assertThat(st.path("fail").path("count").asLong()).isEqualTo(1);
        for (String d : List.of("queue", "compute_input", "compute_infer", "compute_output")) {
            assertThat(st.path(d).path("count").asLong()).as(d).isEqualTo(5);
        }
        assertThat(st.path("compute_infer").path("ns").asLong()).isPositive();
        assertThat(st.path("cache_hit").path("count").asLong(-1)).isZero();
        assertThat(st.path("cache_miss").path("count").asLong(-1)).isZero();
        assertThat(s.path("batch_stats")).hasSize(1);
        assertThat(s.path("batch_stats").get(0).path("batch_size").asLong()).isEqualTo(1);
        assertThat(s.path("batch_stats").get(0).path("compute_infer").path("count").asLong()).isEqualTo(5);
        // a request run alone is a batch of one: its own input and output work, as in inference_stats
        for (String d : List.of("compute_input", "compute_output")) {
            assertThat(s.path("batch_stats").get(0).path(d).path("ns").asLong()).as(d).isPositive();
        }

        String prom = Http.local(managementPort).get("/actuator/prometheus").text();
        assertThat(sample(prom, "nv_inference_request_success", "counted")).isEqualTo(st.path("success").path("count").asLong());
        assertThat(failures(prom, "counted")).isEqualTo(st.path("fail").path("count").asLong());
        assertThat(sample(prom, "nv_inference_count", "counted")).isEqualTo(s.path("inference_count").asLong());
        assertThat(sample(prom, "nv_inference_exec_count", "counted")).isEqualTo(s.path("execution_count").asLong());
        assertThat(sample(prom, "nv_inference_request_duration_us", "counted"))
                .isEqualTo(st.path("success").path("ns").asLong() / 1000);
        assertThat(sample(prom, "nv_inference_queue_duration_us", "counted"))
                .isEqualTo(st.path("queue").path("ns").asLong() / 1000);
        assertThat(sample(prom, "nv_inference_compute_input_duration_us", "counted"))
                .isEqualTo(st.path("compute_input").path("ns").asLong() / 1000);
        assertThat(sample(prom, "nv_inference_compute_infer_duration_us", "counted"))
                .isEqualTo(st.path("compute_infer").path("ns").asLong() / 1000);
        assertThat(sample(prom, "nv_inference_compute_output_duration_us", "counted"))
                .isEqualTo(st.path("compute_output").path("ns").asLong() / 1000);

        // gRPC answers the same message
        var g = grpc.modelStatistics(ModelStatisticsRequest.newBuilder().setName("counted").setVersion("1").build());
        assertThat(Http.JSON.readTree(TritonJson.write(g))).isEqualTo(get("/v2/models/counted/versions/1/stats"));
    }

    @Test
    void aBatchedRequestCountsItsRowsAndItsBatchSize() {
        Reference.TensorValue x = BATCH.cases().get(0).inputs().get(0);  // 3 rows
        JsonNode before = get("/v2/models/batched/stats").path("model_stats").get(0);
        assertThat(http.post("/v2/models/batched/infer", infer("batched", x)).status()).isEqualTo(200);
        JsonNode s = get("/v2/models/batched/stats").path("model_stats").get(0);
        assertThat(s.path("inference_count").asLong() - before.path("inference_count").asLong())
                .isEqualTo(x.shape()[0]);
        assertThat(s.path("execution_count").asLong() - before.path("execution_count").asLong()).isEqualTo(1);
        boolean found = false;
        for (JsonNode b : s.path("batch_stats")) {
            found |= b.path("batch_size").asLong() == x.shape()[0];
        }
        assertThat(found).as(s.toString()).isTrue();
    }

    @Test
    void statisticsOfEveryModelListEveryServingVersion() {
        List<String> names = new ArrayList<>();
        for (JsonNode s : get("/v2/models/stats").path("model_stats")) {
            names.add(s.path("name").asString() + "/" + s.path("version").asString());
        }
        assertThat(names).contains("demo-portable/1", "counted/1", "batched/1");
        assertThat(grpc.modelStatistics(ModelStatisticsRequest.getDefaultInstance()).getModelStatsCount())
                .isEqualTo(names.size());
    }

    @Test
    void grpcAnswersTheSameConfigurationAsRest() {
        for (String model : List.of("demo-portable", "batched")) {
            var c = grpc.modelConfig(ModelConfigRequest.newBuilder().setName(model).build()).getConfig();
            assertThat(Http.JSON.readTree(TritonJson.write(c))).isEqualTo(get("/v2/models/" + model + "/config"));
        }
    }

    @Test
    void aLoadWithAConfigurationMapsInstancesAndBatchingAndALoadWithoutOneRestoresConfigYml() {
        Http.Response r = load("plain", "{\"name\": \"plain\", \"max_batch_size\": 4, \"input\": [{\"name\": \"x\","
                + " \"data_type\": \"TYPE_FP32\", \"dims\": [\"16\"]}], \"instance_group\": [{\"count\": 3, \"kind\":"
                + " \"KIND_CPU\"}], \"dynamic_batching\": {\"max_queue_delay_microseconds\": \"100\","
                + " \"preferred_batch_size\": [2, 4]}}");
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        JsonNode c = get("/v2/models/plain/config");
        assertThat(c.path("max_batch_size").asInt()).isEqualTo(4);
        assertThat(longs(c.path("input").get(0).path("dims"))).containsExactly(16L);
        assertThat(c.path("instance_group").get(0).path("count").asInt()).isEqualTo(3);
        assertThat(c.path("dynamic_batching").path("max_queue_delay_microseconds").asLong()).isEqualTo(100);
        assertThat(longs(c.path("dynamic_batching").path("preferred_batch_size"))).containsExactly(2L, 4L);
        // config.yml's version-policy: { latest: 1 } stays, as the document did not say
        assertThat(c.path("version_policy").path("latest").path("num_versions").asInt()).isEqualTo(1);
        assertServesItsReference("plain");

        // A document without dynamic_batching describes a model that does not batch.
        r = load("plain", "{\"instance_group\": [{\"count\": 2}], \"version_policy\": {\"all\": {}}}");
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        c = get("/v2/models/plain/config");
        assertThat(c.path("max_batch_size").asInt()).isZero();
        assertThat(c.has("dynamic_batching")).isFalse();
        assertThat(c.path("instance_group").get(0).path("count").asInt()).isEqualTo(2);
        assertThat(c.path("version_policy").has("all")).isTrue();

        // Without a configuration the model loads as config.yml says (1 instance).
        assertThat(load("plain", null).status()).isEqualTo(200);
        c = get("/v2/models/plain/config");
        assertThat(c.path("instance_group").get(0).path("count").asInt()).isEqualTo(1);
        assertThat(c.path("max_batch_size").asInt()).isZero();
        assertServesItsReference("plain");
    }

    @Test
    void aLoadWithAConfigurationOverGrpcDoesTheSame() {
        grpc.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("plain").putParameters("config",
                ModelRepositoryParameter.newBuilder().setStringParam("{\"maxBatchSize\": 2, \"dynamicBatching\": {},"
                        + " \"instanceGroup\": [{\"count\": 2, \"kind\": \"KIND_AUTO\"}]}").build()).build());
        var c = grpc.modelConfig(ModelConfigRequest.newBuilder().setName("plain").build()).getConfig();
        assertThat(c.getMaxBatchSize()).isEqualTo(2);
        assertThat(c.hasDynamicBatching()).isTrue();
        assertThat(c.getInstanceGroup(0).getCount()).isEqualTo(2);
        StatusRuntimeException e = Assertions.assertThrows(StatusRuntimeException.class,
                () -> grpc.repositoryModelLoad(RepositoryModelLoadRequest.newBuilder().setModelName("plain")
                        .putParameters("config", ModelRepositoryParameter.newBuilder()
                                .setStringParam("{\"sequence_batching\": {\"max_sequence_idle_microseconds\": 5}}")
                                .build()).build()));
        assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.INVALID_ARGUMENT);
        assertThat(e.getStatus().getDescription()).contains("sequence_batching");
        assertThat(load("plain", null).status()).isEqualTo(200);
    }

    @Test
    void whatCannotBeHonouredIsRefusedNamingTheFieldAndChangesNothing() {
        assertThat(load("plain", null).status()).isEqualTo(200);
        JsonNode before = get("/v2/models/plain/config");
        String[][] cases = {
            {"{\"sequence_batching\": {\"max_sequence_idle_microseconds\": 1000}}", "sequence_batching"},
            {"{\"ensemble_scheduling\": {\"step\": [{\"model_name\": \"a\"}]}}", "ensemble_scheduling"},
            {"{\"instance_group\": [{\"count\": 1, \"kind\": \"KIND_GPU\"}]}", "instance_group[0].kind"},
            {"{\"instance_group\": [{\"kind\": \"KIND_MODEL\"}]}", "instance_group[0].kind"},
            {"{\"instance_group\": [{\"count\": 1}, {\"count\": 1}]}", "instance_group"},
            {"{\"max_batch_size\": 4, \"dynamic_batching\": {", "not valid JSON"},
            {"[1, 2]", "JSON object"},
            {"{\"no_such_field\": 1}", "no_such_field"},
            {"{\"name\": \"other\"}", "'name'"},
            {"{\"platform\": \"onnxruntime_onnx\"}", "platform"},
            {"{\"max_batch_size\": 4}", "max_batch_size"},
            {"{\"dynamic_batching\": {}}", "dynamic_batching"},
            {"{\"max_batch_size\": 4, \"dynamic_batching\": {\"priority_levels\": 2}}", "dynamic_batching.priority_levels"},
            {"{\"max_batch_size\": 4, \"dynamic_batching\": {\"preferred_batch_size\": [8]}}", "dynamic_batching"},
            {"{\"max_batch_size\": 4, \"dynamic_batching\": {}, \"input\": [{\"name\": \"x\", \"dims\": [8]}]}", "input.dims"},
            {"{\"input\": [{\"name\": \"nope\"}]}", "input.name"},
            {"{\"input\": [{\"name\": \"x\", \"data_type\": \"TYPE_INT8\"}]}", "input.data_type"},
            {"{\"model_transaction_policy\": {\"decoupled\": true}}", "decoupled"},
            {"{\"response_cache\": {\"enable\": true}}", "response_cache.enable"},
            {"{\"optimization\": {\"cuda\": {\"graphs\": true}}}", "optimization"},
            {"{\"instance_group\": [{\"count\": \"many\"}]}", "instance_group[0].count"},
            // over the program's bound (32 rows): the loader refuses it, what served serves on
            {"{\"max_batch_size\": 64, \"dynamic_batching\": {}}", "over the bound"},
        };
        for (String[] c : cases) {
            Http.Response r = load("plain", c[0]);
            assertThat(r.status()).as(c[0] + ": " + r.text()).isEqualTo(400);
            assertThat(r.json().path("error").asString()).as(c[0]).contains(c[1]);
        }
        Http.Response files = http.post("/v2/repository/models/plain/load",
                "{\"parameters\": {\"file:1/model.pte\": \"AAAA\"}}");
        assertThat(files.status()).isEqualTo(400);
        assertThat(files.json().path("error").asString()).contains("file:1/model.pte");
        Http.Response notString = http.post("/v2/repository/models/plain/load", "{\"parameters\": {\"config\": {}}}");
        assertThat(notString.status()).isEqualTo(400);
        assertThat(get("/v2/models/plain/config")).isEqualTo(before);
        assertServesItsReference("plain");
    }

    void assertServesItsReference(String model) {
        Reference.Case c = BATCH.cases().get(0);
        Http.Response r = http.post("/v2/models/" + model + "/infer", infer(model, c.inputs().get(0)));
        assertThat(r.status()).as(r.text()).isEqualTo(200);
        JsonNode data = r.json().path("outputs").get(0).path("data");
        List<Double> want = c.outputs().get(0).data();
        assertThat(data).hasSize(want.size());
        for (int i = 0; i < want.size(); i++) {
            assertThat(BATCH.close(data.get(i).asDouble(), want.get(i))).as("element " + i).isTrue();
        }
    }
}
