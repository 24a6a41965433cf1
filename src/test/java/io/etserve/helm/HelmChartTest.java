package io.etserve.helm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.marcnuri.helm.Helm;
import com.marcnuri.helm.LintResult;
import com.marcnuri.helm.TemplateCommand;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.yaml.snakeyaml.Yaml;

/**
 * Renders helm/etserve with the Helm library bundled by helm-java and checks the manifests as
 * parsed YAML. No cluster: lint and template run offline.
 */
class HelmChartTest {

    private static final Path CHART =
            Paths.get(System.getProperty("etserve.test.helm-chart", "helm/etserve")).toAbsolutePath();
    // helm-java's template defaults to Kubernetes 1.20, below the chart's kubeVersion.
    private static final String KUBE_VERSION = "1.32.0";
    private static final String RELEASE = "demo";
    private static final String FULLNAME = "demo-etserve";

    @TempDir
    Path tempDir;

    @Test
    void lintPassesInStrictMode() {
        LintResult result = new Helm(CHART).lint().strict().call();

        assertThat(result.isFailed()).as("lint messages: %s", result.getMessages()).isFalse();
        assertThat(result.getMessages()).noneMatch(m -> m.contains("[WARNING]") || m.contains("[ERROR]"));
    }

    @Test
    void defaultsRenderTheCoreObjectsOnly() {
        List<Map<String, Object>> docs = render(Map.of());

        assertThat(kinds(docs)).containsExactlyInAnyOrder(
                "ServiceAccount", "ConfigMap", "Secret", "Service", "Deployment", "PodDisruptionBudget");
        assertThat(get(find(docs, "Deployment"), "spec", "replicas")).isEqualTo(1);
        assertThat(get(find(docs, "PodDisruptionBudget"), "spec", "minAvailable")).isEqualTo(1);
        assertThat(get(find(docs, "ServiceAccount"), "automountServiceAccountToken")).isEqualTo(false);
    }

    @Test
    void defaultsAskForOneNvidiaGpuAndTolerateTheGpuTaint() {
        Map<String, Object> pod = podSpec(render(Map.of()));

        assertThat(limits(pod)).containsEntry("nvidia.com/gpu", 1).containsEntry("memory", "8Gi");
        assertThat(list(pod, "tolerations")).contains(
                Map.of("key", "nvidia.com/gpu", "operator", "Exists", "effect", "NoSchedule"));
    }

    @Test
    void containerExposesHttpAndManagementPortsAndProbesTheActuator() {
        Map<String, Object> container = mainContainer(render(Map.of()));

        assertThat(list(container, "ports")).extracting(p -> p.get("name") + ":" + p.get("containerPort"))
                .containsExactly("http:8080", "management:8081", "grpc:8001");
        assertThat(get(container, "startupProbe", "httpGet"))
                .isEqualTo(Map.of("path", "/actuator/health/liveness", "port", "management"));
        assertThat(get(container, "livenessProbe", "httpGet"))
                .isEqualTo(Map.of("path", "/actuator/health/liveness", "port", "management"));
        assertThat(get(container, "readinessProbe", "httpGet"))
                .isEqualTo(Map.of("path", "/actuator/health/readiness", "port", "management"));
        // Model loads take minutes: the startup probe must allow far more than liveness does.
        int startupSeconds = (int) get(container, "startupProbe", "periodSeconds")
                * (int) get(container, "startupProbe", "failureThreshold");
        assertThat(startupSeconds).isGreaterThanOrEqualTo(300);

        Map<String, Object> service = find(render(Map.of()), "Service");
        assertThat(get(service, "spec", "type")).isEqualTo("ClusterIP");
        assertThat(list(service, "spec", "ports")).extracting(p -> p.get("name") + ":" + p.get("port") + "->" + p.get("targetPort"))
                .containsExactly("http:8080->http", "management:8081->management", "grpc:8001->grpc");
    }

    @Test
    void podAndContainerRunRestricted() {
        List<Map<String, Object>> docs = render(Map.of());
        Map<String, Object> pod = podSpec(docs);
        Map<String, Object> container = mainContainer(docs);

        assertThat(map(pod, "securityContext"))
                .containsEntry("runAsNonRoot", true)
                .containsEntry("runAsUser", 10001)
                .containsEntry("fsGroup", 10001)
                .containsEntry("seccompProfile", Map.of("type", "RuntimeDefault"));
        assertThat(map(container, "securityContext"))
                .containsEntry("runAsNonRoot", true)
                .containsEntry("runAsUser", 10001)
                .containsEntry("readOnlyRootFilesystem", true)
                .containsEntry("allowPrivilegeEscalation", false)
                .containsEntry("capabilities", Map.of("drop", List.of("ALL")))
                .containsEntry("seccompProfile", Map.of("type", "RuntimeDefault"));
    }

    @Test
    void containerGetsWritableTmpReadOnlyConfigAndItsEnvironment() {
        List<Map<String, Object>> docs = render(Map.of());
        Map<String, Object> pod = podSpec(docs);
        Map<String, Object> container = mainContainer(docs);

        assertThat(mountsByName(container).get("tmp")).containsEntry("mountPath", "/tmp").doesNotContainKey("readOnly");
        assertThat(mountsByName(container).get("config")).containsEntry("mountPath", "/etc/etserve").containsEntry("readOnly", true);
        assertThat(mountsByName(container)).doesNotContainKey("models");
        assertThat(volumesByName(pod).get("tmp")).containsKey("emptyDir");
        assertThat(get(volumesByName(pod).get("config"), "configMap", "name")).isEqualTo(FULLNAME);

        Map<String, String> env = env(container);
        assertThat(env).containsEntry("SPRING_CONFIG_ADDITIONAL_LOCATION", "optional:file:/etc/etserve/")
                .containsEntry("ETSERVE_MODEL_REPOSITORY", "/models")
                .containsEntry("TMPDIR", "/tmp");
        assertThat(env.get("JAVA_TOOL_OPTIONS")).contains("-Dorg.bytedeco.javacpp.cachedir=/tmp/javacpp");
    }

    @Test
    void sharedMemoryOnLetsClientsRegisterAndGivesThePodAMemoryBackedDevShmASidecarCanMount() {
        List<Map<String, Object>> off = render(Map.of());
        assertThat(list(podSpec(off), "containers")).extracting(c -> c.get("name")).containsExactly("etserve");
        assertThat(env(mainContainer(off))).doesNotContainKey("ETSERVE_SHARED_MEMORY");
        assertThat(volumesByName(podSpec(off))).doesNotContainKey("shm");

        List<Map<String, Object>> on = render(Map.of("sharedMemory.enabled", true, "sharedMemory.sizeLimit", "2Gi",
                "extraContainers[0].name", "client", "extraContainers[0].image", "example/client:1",
                "extraContainers[0].volumeMounts[0].name", "shm", "extraContainers[0].volumeMounts[0].mountPath", "/dev/shm"));
        assertThat(env(mainContainer(on))).containsEntry("ETSERVE_SHARED_MEMORY", "true");
        assertThat(mountsByName(mainContainer(on)).get("shm")).containsEntry("mountPath", "/dev/shm");
        assertThat(get(volumesByName(podSpec(on)).get("shm"), "emptyDir"))
                .isEqualTo(Map.of("medium", "Memory", "sizeLimit", "2Gi"));
        List<Map<String, Object>> containers = list(podSpec(on), "containers");
        assertThat(containers).extracting(c -> c.get("name")).containsExactly("etserve", "client");
    }

    @Test
    void repositoryControlIsRestrictedByDefaultWithAKeyFromASecret() {
        List<Map<String, Object>> docs = render(Map.of());
        Map<String, Object> container = mainContainer(docs);
        assertThat(env(container)).containsEntry("ETSERVE_REPOSITORY_API_HEADER", "admin-key");
        Map<String, Object> key = byName(list(container, "env")).get("ETSERVE_REPOSITORY_API_KEY");
        assertThat(get(key, "valueFrom", "secretKeyRef", "name")).isEqualTo(FULLNAME + "-api-keys");
        assertThat(get(key, "valueFrom", "secretKeyRef", "key")).isEqualTo("model-repository");
        Map<String, Object> secret = find(docs, "Secret");
        assertThat(get(secret, "metadata", "name")).isEqualTo(FULLNAME + "-api-keys");
        String value = new String(Base64.getDecoder().decode((String) get(secret, "data", "model-repository")),
                StandardCharsets.US_ASCII);
        assertThat(value).hasSize(32).matches("[A-Za-z0-9]+");

        // An operator's own Secret: referenced, none made.
        List<Map<String, Object>> own = render(Map.of("restrictedApi.modelRepository.existingSecret", "ops-keys",
                "restrictedApi.modelRepository.existingSecretKey", "repo"));
        assertThat(kinds(own)).doesNotContain("Secret");
        Map<String, Object> ownKey = byName(list(mainContainer(own), "env")).get("ETSERVE_REPOSITORY_API_KEY");
        assertThat(get(ownKey, "valueFrom", "secretKeyRef", "name")).isEqualTo("ops-keys");
        assertThat(get(ownKey, "valueFrom", "secretKeyRef", "key")).isEqualTo("repo");

        // Opened explicitly: no key at all.
        List<Map<String, Object>> open = render(Map.of("restrictedApi.modelRepository.header", ""));
        assertThat(kinds(open)).doesNotContain("Secret");
        assertThat(env(mainContainer(open))).doesNotContainKeys("ETSERVE_REPOSITORY_API_HEADER", "ETSERVE_REPOSITORY_API_KEY");
    }

    @Test
    void managementCanBeBoundToThePodAddressOnly() {
        assertThat(env(mainContainer(render(Map.of())))).doesNotContainKey("MANAGEMENT_SERVER_ADDRESS");
        Map<String, Object> podIp = byName(list(mainContainer(render(Map.of("ports.managementAddress", "podIP"))), "env"))
                .get("MANAGEMENT_SERVER_ADDRESS");
        assertThat(get(podIp, "valueFrom", "fieldRef", "fieldPath")).isEqualTo("status.podIP");
        assertThat(env(mainContainer(render(Map.of("ports.managementAddress", "10.1.2.3")))))
                .containsEntry("MANAGEMENT_SERVER_ADDRESS", "10.1.2.3");
    }

    @Test
    void configMapCarriesValuesConfigAndTheChartOwnedSettings() throws IOException {
        Path values = write("config.yaml", """
                config:
                  etserve:
                    scheduler:
                      queue-capacity: 64
                  server:
                    port: 9999
                """);
        List<Map<String, Object>> docs = render(Map.of(), values);

        Map<String, Object> app = applicationYml(docs);
        assertThat(get(app, "etserve", "scheduler", "queue-capacity")).isEqualTo(64);
        // The values' default config survives alongside the user's keys.
        assertThat(get(app, "management", "endpoints", "web", "exposure", "include")).isEqualTo("health,info,prometheus");
        // Ports are chart-owned: probes and the Service depend on them.
        assertThat(get(app, "server", "port")).isEqualTo(8080);
        assertThat(get(app, "management", "server", "port")).isEqualTo(8081);
        assertThat(get(app, "etserve", "grpc", "port")).isEqualTo(8001);
        // the user's etserve keys survive the chart-owned gRPC port
        assertThat(get(app, "etserve", "scheduler", "queue-capacity")).isEqualTo(64);
        assertThat(get(app, "management", "endpoint", "health", "probes", "enabled")).isEqualTo(true);
        assertThat(get(app, "server", "shutdown")).isEqualTo("graceful");
        // On GPU nodes gRPC calls of a connection alone on its event loop run there (REST's do by
        // the service's own default), a default the config may change.
        assertThat(get(app, "etserve", "grpc", "inline-alone-below")).isEqualTo("20ms");
        assertThat(map(app, "etserve")).doesNotContainKey("http");
        Map<String, Object> cpu = applicationYml(render(Map.of("gpu.enabled", false)));
        assertThat(map(cpu, "etserve", "grpc")).doesNotContainKey("inline-alone-below");
        assertThat(get(applicationYml(render(Map.of("config.etserve.grpc.inline-alone-below", "0s"))),
                "etserve", "grpc", "inline-alone-below")).isEqualTo("0s");
    }

    @Test
    void tracingValuesTurnTracingOnWithTheirEndpointAndRatioForTheDeploymentAndKServe() {
        Map<String, Object> off = applicationYml(render(Map.of()));
        assertThat(map(off, "etserve")).doesNotContainKey("tracing");
        assertThat(map(off, "management")).doesNotContainKey("opentelemetry");

        // --set passes a decimal as a string: the chart takes it as the number it is
        Map<String, Object> tracing = Map.of("tracing.enabled", true, "tracing.samplingRatio", "0.25",
                "tracing.endpoint", "http://otel-collector.observability:4318/v1/traces");
        Map<String, Object> app = applicationYml(render(tracing));
        assertThat(get(app, "etserve", "tracing", "enabled")).isEqualTo(true);
        assertThat(get(app, "management", "tracing", "sampling", "probability")).isEqualTo(0.25);
        assertThat(get(app, "management", "opentelemetry", "tracing", "export", "otlp", "endpoint"))
                .isEqualTo("http://otel-collector.observability:4318/v1/traces");
        // the values' own management keys survive beside them
        assertThat(get(app, "management", "endpoints", "web", "exposure", "include")).isEqualTo("health,info,prometheus");

        var withKServe = new LinkedHashMap<>(tracing);
        withKServe.put("kserve.servingRuntime.enabled", true);
        Map<String, Object> runtime = find(render(withKServe), "ClusterServingRuntime");
        Map<String, Map<String, Object>> env = byName(list(list(runtime, "spec", "containers").get(0), "env"));
        Map<String, Object> json = new Yaml().load((String) env.get("SPRING_APPLICATION_JSON").get("value"));
        assertThat(get(json, "etserve", "tracing", "enabled")).isEqualTo(true);

        assertThatThrownBy(() -> render(Map.of("tracing.enabled", true))).hasMessageContaining("tracing.endpoint");
        assertThatThrownBy(() -> render(Map.of("tracing.samplingRatio", 2))).hasMessageContaining("samplingRatio");
        assertThatThrownBy(() -> render(Map.of("tracing.samplingRatio", "half"))).hasMessageContaining("samplingRatio");
    }

    @Test
    void privateCopiesOfServedProgramsOnlyWhereTheModelVolumeCanChange() {
        assertThat(get(applicationYml(render(Map.of())), "etserve", "repository", "private-copies")).isEqualTo(false);
        assertThat(get(applicationYml(render(Map.of("models.source", "pvc", "models.pvc.claimName", "models"))),
                "etserve", "repository", "private-copies")).isEqualTo(true);
        assertThat(get(applicationYml(render(Map.of("models.privateCopies", "true"))),
                "etserve", "repository", "private-copies")).isEqualTo(true);
        // A user's own config wins over the chart's default.
        assertThat(get(applicationYml(render(Map.of("models.source", "pvc", "models.pvc.claimName", "models",
                "config.etserve.repository.private-copies", false))), "etserve", "repository", "private-copies"))
                .isEqualTo(false);
    }

    @Test
    void shutdownTimingsFitInsideTheGracePeriod() {
        List<Map<String, Object>> defaults = render(Map.of());
        assertThat(get(podSpec(defaults), "terminationGracePeriodSeconds")).isEqualTo(60);
        assertThat(get(mainContainer(defaults), "lifecycle", "preStop", "sleep", "seconds")).isEqualTo(10);
        // 60 - 10 (preStop) - 10 (margin)
        assertThat(get(applicationYml(defaults), "spring", "lifecycle", "timeout-per-shutdown-phase")).isEqualTo("40s");
        // streams stuck past the phase are waited for within the margin, not the service's 30 s
        assertThat(get(applicationYml(defaults), "etserve", "cuda", "drain-timeout")).isEqualTo("5s");
        assertThat(get(applicationYml(render(Map.of("config.etserve.cuda.drain-timeout", "8s"))),
                "etserve", "cuda", "drain-timeout")).isEqualTo("8s");

        List<Map<String, Object>> longer = render(Map.of(
                "shutdown.gracePeriodSeconds", 120, "shutdown.preStopSeconds", 20));
        assertThat(get(podSpec(longer), "terminationGracePeriodSeconds")).isEqualTo(120);
        assertThat(get(mainContainer(longer), "lifecycle", "preStop", "sleep", "seconds")).isEqualTo(20);
        assertThat(get(applicationYml(longer), "spring", "lifecycle", "timeout-per-shutdown-phase")).isEqualTo("90s");

        assertThatThrownBy(() -> render(Map.of("shutdown.gracePeriodSeconds", 15)))
                .hasMessageContaining("shutdown.gracePeriodSeconds");
    }

    @Test
    void preStopFallsBackToExecSleepBeforeKubernetes130() {
        Map<String, Object> container = mainContainer(parse(template(Map.of()).withKubeVersion("1.29.0").call()));

        assertThat(get(container, "lifecycle", "preStop"))
                .isEqualTo(Map.of("exec", Map.of("command", List.of("sleep", "10"))));
        assertThat(mainContainer(render(Map.of("shutdown.preStopAction", "none")))).doesNotContainKey("lifecycle");
    }

    @Test
    void configChangesChangeThePodChecksum() {
        String before = podAnnotation(render(Map.of()), "checksum/config");
        String after = podAnnotation(render(Map.of("config.etserve.scheduler.queue-capacity", 8)), "checksum/config");
        String again = podAnnotation(render(Map.of()), "checksum/config");

        assertThat(before).matches("[0-9a-f]{64}").isEqualTo(again).isNotEqualTo(after);
    }

    @Test
    void gpuDisabledDropsTheGpuResourceAndToleration() throws IOException {
        Path values = write("cpu.yaml", """
                gpu:
                  enabled: false
                tolerations:
                  - key: dedicated
                    operator: Equal
                    value: inference
                    effect: NoSchedule
                """);
        Map<String, Object> pod = podSpec(render(Map.of(), values));

        assertThat(limits(pod)).containsOnlyKeys("memory");
        assertThat(list(pod, "tolerations")).containsExactly(
                Map.of("key", "dedicated", "operator", "Equal", "value", "inference", "effect", "NoSchedule"));
        // Where the node's default runtime is NVIDIA's, the CUDA image would still see every GPU.
        Map<String, Map<String, Object>> env = byName(list(list(pod, "containers").get(0), "env"));
        assertThat(env.get("NVIDIA_VISIBLE_DEVICES")).containsEntry("value", "void");
        Map<String, Map<String, Object>> gpuEnv = byName(list(list(podSpec(render(Map.of())), "containers").get(0), "env"));
        assertThat(gpuEnv).doesNotContainKey("NVIDIA_VISIBLE_DEVICES");
    }

    @Test
    void migUsersNameTheirSliceResource() {
        Map<String, Object> pod = podSpec(render(Map.of(
                "gpu.resourceName", "nvidia.com/mig-1g.18gb", "gpu.count", 2)));

        assertThat(limits(pod)).containsEntry("nvidia.com/mig-1g.18gb", 2).doesNotContainKey("nvidia.com/gpu");
    }

    @Test
    void pvcModelsMountTheExistingClaimReadOnly() {
        List<Map<String, Object>> docs = render(Map.of("models.source", "pvc", "models.pvc.claimName", "model-store"));
        Map<String, Object> pod = podSpec(docs);

        assertThat(volumesByName(pod).get("models"))
                .containsEntry("persistentVolumeClaim", Map.of("claimName", "model-store", "readOnly", true));
        assertThat(mountsByName(mainContainer(docs)).get("models"))
                .containsEntry("mountPath", "/models").containsEntry("readOnly", true);
        assertThat(pod).doesNotContainKey("initContainers");

        assertThatThrownBy(() -> render(Map.of("models.source", "pvc")))
                .hasMessageContaining("models.pvc.claimName is required");
    }

    @Test
    void imageModelsAreCopiedByAnInitContainerIntoAnEmptyDir() {
        List<Map<String, Object>> docs = render(Map.of(
                "models.source", "image", "models.image.repository", "registry.example/models/resnet",
                "models.image.tag", "v3"));
        Map<String, Object> pod = podSpec(docs);

        List<Map<String, Object>> inits = list(pod, "initContainers");
        assertThat(inits).hasSize(1);
        Map<String, Object> copy = inits.get(0);
        assertThat(copy).containsEntry("image", "registry.example/models/resnet:v3")
                .containsEntry("imagePullPolicy", "IfNotPresent");
        assertThat(copy.get("command")).isEqualTo(List.of("cp", "-R", "/models/.", "/copy-target/"));
        assertThat(list(copy, "volumeMounts")).containsExactly(Map.of("name", "models", "mountPath", "/copy-target"));
        assertThat(map(copy, "securityContext")).containsEntry("readOnlyRootFilesystem", true).containsEntry("runAsNonRoot", true);

        assertThat(volumesByName(pod).get("models")).containsKey("emptyDir").doesNotContainKey("persistentVolumeClaim");
        assertThat(mountsByName(mainContainer(docs)).get("models"))
                .containsEntry("mountPath", "/models").containsEntry("readOnly", true);

        assertThatThrownBy(() -> render(Map.of("models.source", "image")))
                .hasMessageContaining("models.image.repository is required");
        // A moving tag is pulled on each start: a node's cached latest would serve old models.
        Map<String, Object> latest = list(podSpec(render(Map.of("models.source", "image",
                "models.image.repository", "registry.example/models/resnet"))), "initContainers").get(0);
        assertThat(latest).containsEntry("image", "registry.example/models/resnet:latest")
                .containsEntry("imagePullPolicy", "Always");
    }

    @Test
    void serviceMonitorAndAutoscalerWhenEnabled() {
        List<Map<String, Object>> docs = render(Map.of(
                "metrics.serviceMonitor.enabled", true, "metrics.serviceMonitor.labels.release", "prometheus",
                "autoscaling.enabled", true, "autoscaling.maxReplicas", 6,
                "autoscaling.queueTimeMetric.name", "etserve_queue_time", "autoscaling.queueTimeMetric.targetAverageValue", "250000"));

        assertThat(kinds(docs)).contains("ServiceMonitor", "HorizontalPodAutoscaler");
        Map<String, Object> monitor = find(docs, "ServiceMonitor");
        assertThat(get(monitor, "apiVersion")).isEqualTo("monitoring.coreos.com/v1");
        assertThat(map(monitor, "metadata", "labels")).containsEntry("release", "prometheus");
        assertThat(list(monitor, "spec", "endpoints").get(0))
                .containsEntry("port", "management").containsEntry("path", "/actuator/prometheus");

        Map<String, Object> hpa = find(docs, "HorizontalPodAutoscaler");
        assertThat(get(hpa, "apiVersion")).isEqualTo("autoscaling/v2");
        assertThat(get(hpa, "spec", "scaleTargetRef", "name")).isEqualTo(FULLNAME);
        assertThat(get(hpa, "spec", "maxReplicas")).isEqualTo(6);
        Map<String, Object> metric = list(hpa, "spec", "metrics").get(0);
        assertThat(metric).containsEntry("type", "Pods");
        assertThat(get(metric, "pods", "metric", "name")).isEqualTo("etserve_queue_time");
        assertThat(get(metric, "pods", "target")).isEqualTo(Map.of("type", "AverageValue", "averageValue", "250000"));
        // The autoscaler owns the replica count.
        assertThat(map(find(docs, "Deployment"), "spec")).doesNotContainKey("replicas");
    }

    @Test
    void pdbCanBeDisabled() {
        assertThat(kinds(render(Map.of("pdb.enabled", false)))).doesNotContain("PodDisruptionBudget");
        // maxUnavailable 0 is a budget (no voluntary disruption), not an unset value.
        assertThat(get(find(render(Map.of("pdb.maxUnavailable", 0)), "PodDisruptionBudget"), "spec"))
                .isEqualTo(Map.of("maxUnavailable", 0, "selector", Map.of("matchLabels",
                        Map.of("app.kubernetes.io/name", "etserve", "app.kubernetes.io/instance", RELEASE))));
    }

    @Test
    void portsThatCollideAndAProbeThatMustSucceedTwiceAreRefusedAtRender() {
        assertThatThrownBy(() -> render(Map.of("ports.http", 9000, "ports.management", 9000)))
                .hasMessageContaining("must differ");
        assertThatThrownBy(() -> render(Map.of("ports.grpc", 8080))).hasMessageContaining("must differ");
        // Kubernetes takes only 1 for liveness and startup probes.
        assertThatThrownBy(() -> render(Map.of("probes.liveness.successThreshold", 2)))
                .hasMessageContaining("successThreshold");
        assertThat(get(mainContainer(render(Map.of("probes.readiness.successThreshold", 2))),
                "readinessProbe", "successThreshold")).isEqualTo(2);
    }

    @Test
    void topologySpreadDefaultsToHostnamesWithTheChartSelector() {
        List<Map<String, Object>> docs = render(Map.of());
        Map<String, Object> constraint = list(podSpec(docs), "topologySpreadConstraints").get(0);

        assertThat(constraint).containsEntry("topologyKey", "kubernetes.io/hostname")
                .containsEntry("whenUnsatisfiable", "ScheduleAnyway")
                .containsEntry("maxSkew", 1);
        assertThat(get(constraint, "labelSelector", "matchLabels"))
                .isEqualTo(get(find(docs, "Deployment"), "spec", "selector", "matchLabels"))
                .isEqualTo(Map.of("app.kubernetes.io/name", "etserve", "app.kubernetes.io/instance", RELEASE));
    }

    @Test
    void schemaRejectsUnknownModelSourcesAndMistypedGpuKeys() {
        assertThatThrownBy(() -> render(Map.of("models.source", "s3"))).hasMessageContaining("models/source");
        assertThatThrownBy(() -> render(Map.of("gpu.resoureName", "nvidia.com/gpu"))).hasMessageContaining("resoureName");
    }

    @Test
    void kserveServingRuntimeReplacesTheDeployment() {
        assertThat(kinds(render(Map.of()))).doesNotContain("ClusterServingRuntime", "ServingRuntime");
        List<Map<String, Object>> docs = render(Map.of("kserve.servingRuntime.enabled", true,
                "config.etserve.inference.queue-timeout", "5s"));
        // KServe makes the pods: only the runtime is rendered.
        assertThat(kinds(docs)).containsExactly("ClusterServingRuntime");
        Map<String, Object> runtime = find(docs, "ClusterServingRuntime");
        assertThat(get(runtime, "apiVersion")).isEqualTo("serving.kserve.io/v1alpha1");
        assertThat(get(runtime, "metadata", "name")).isEqualTo(FULLNAME);
        assertThat(list(runtime, "spec", "supportedModelFormats")).containsExactly(
                Map.of("name", "executorch", "version", "1", "autoSelect", true));
        assertThat(get(runtime, "spec", "protocolVersions")).isEqualTo(List.of("v2", "grpc-v2"));
        assertThat(get(runtime, "spec", "annotations")).isEqualTo(Map.of("prometheus.kserve.io/port", "8081",
                "prometheus.kserve.io/path", "/actuator/prometheus"));
        List<Map<String, Object>> containers = list(runtime, "spec", "containers");
        assertThat(containers).hasSize(1);
        Map<String, Object> c = containers.get(0);
        assertThat(c.get("name")).isEqualTo("kserve-container");
        assertThat((String) c.get("image")).isNotBlank();
        assertThat(list(c, "ports")).extracting(p -> p.get("containerPort")).containsExactly(8080);
        Map<String, Map<String, Object>> env = byName(list(c, "env"));
        assertThat(env.get("ETSERVE_MODEL_REPOSITORY").get("value")).isEqualTo("/mnt/models");
        // the chart's application config travels as SPRING_APPLICATION_JSON: ports and the user's keys
        Map<String, Object> app = new Yaml().load((String) env.get("SPRING_APPLICATION_JSON").get("value"));
        assertThat(get(app, "server", "port")).isEqualTo(8080);
        assertThat(get(app, "etserve", "grpc", "port")).isEqualTo(8001);
        assertThat(get(app, "etserve", "inference", "queue-timeout")).isEqualTo("5s");
        for (String probe : List.of("startupProbe", "livenessProbe", "readinessProbe")) {
            assertThat(get(c, probe, "httpGet", "port")).as(probe).isEqualTo(8081);
        }
        assertThat(get(c, "readinessProbe", "httpGet", "path")).isEqualTo("/actuator/health/readiness");
        // A read-only root file system: /tmp is a volume of the runtime's own, as the Deployment's.
        assertThat(list(c, "volumeMounts")).containsExactly(Map.of("name", "tmp", "mountPath", "/tmp"));
        assertThat(list(runtime, "spec", "volumes")).containsExactly(
                Map.of("name", "tmp", "emptyDir", Map.of("sizeLimit", "4Gi")));
        assertThat(list(runtime, "spec", "tolerations")).containsExactly(
                Map.of("key", "nvidia.com/gpu", "operator", "Exists", "effect", "NoSchedule"));
        assertThat(env.get("JAVA_TOOL_OPTIONS").get("value")).asString().contains("javacpp.cachedir=/tmp/javacpp");

        List<Map<String, Object>> namespaced = render(Map.of("kserve.servingRuntime.enabled", true,
                "kserve.servingRuntime.clusterScoped", false, "kserve.servingRuntime.name", "executorch"));
        assertThat(get(find(namespaced, "ServingRuntime"), "metadata", "name")).isEqualTo("executorch");
        assertThatThrownBy(() -> render(Map.of("kserve.servingRuntime.enable", true))).hasMessageContaining("enable");
    }

    // --- rendering and navigation ---

    private TemplateCommand template(Map<String, Object> sets) {
        TemplateCommand command = new Helm(CHART).template().withName(RELEASE).withNamespace("inference");
        for (Map.Entry<String, Object> set : sets.entrySet()) {
            command = command.set(set.getKey(), set.getValue());
        }
        return command;
    }

    private List<Map<String, Object>> render(Map<String, Object> sets) {
        return parse(template(sets).withKubeVersion(KUBE_VERSION).call());
    }

    private List<Map<String, Object>> render(Map<String, Object> sets, Path valuesFile) {
        return parse(template(sets).withValuesFile(valuesFile).withKubeVersion(KUBE_VERSION).call());
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> parse(String manifests) {
        List<Map<String, Object>> docs = new ArrayList<>();
        for (Object doc : new Yaml().loadAll(manifests)) {
            if (doc != null) {
                docs.add((Map<String, Object>) doc);
            }
        }
        return docs;
    }

    private Path write(String name, String content) throws IOException {
        return Files.writeString(tempDir.resolve(name), content);
    }

    private static List<String> kinds(List<Map<String, Object>> docs) {
        return docs.stream().map(d -> (String) d.get("kind")).collect(Collectors.toList());
    }

    private static Map<String, Object> find(List<Map<String, Object>> docs, String kind) {
        List<Map<String, Object>> matches = docs.stream().filter(d -> kind.equals(d.get("kind"))).toList();
        assertThat(matches).as("exactly one %s", kind).hasSize(1);
        return matches.get(0);
    }

    private static Map<String, Object> podSpec(List<Map<String, Object>> docs) {
        return map(find(docs, "Deployment"), "spec", "template", "spec");
    }

    private static Map<String, Object> mainContainer(List<Map<String, Object>> docs) {
        List<Map<String, Object>> containers = list(podSpec(docs), "containers");
        assertThat(containers.get(0).get("name")).as("the service's container comes first").isEqualTo("etserve");
        return containers.get(0);
    }

    private static Map<String, Object> limits(Map<String, Object> pod) {
        return map(list(pod, "containers").get(0), "resources", "limits");
    }

    private static String podAnnotation(List<Map<String, Object>> docs, String key) {
        return (String) map(find(docs, "Deployment"), "spec", "template", "metadata", "annotations").get(key);
    }

    private static Map<String, Object> applicationYml(List<Map<String, Object>> docs) {
        Map<String, Object> configMap = find(docs, "ConfigMap");
        assertThat(get(configMap, "metadata", "name")).isEqualTo(FULLNAME);
        String text = (String) map(configMap, "data").get("application.yml");
        return new Yaml().load(text);
    }

    private static Map<String, String> env(Map<String, Object> container) {
        Map<String, String> env = new LinkedHashMap<>();
        for (Map<String, Object> var : list(container, "env")) {
            env.put((String) var.get("name"), (String) var.get("value"));
        }
        return env;
    }

    private static Map<String, Map<String, Object>> mountsByName(Map<String, Object> container) {
        return byName(list(container, "volumeMounts"));
    }

    private static Map<String, Map<String, Object>> volumesByName(Map<String, Object> pod) {
        return byName(list(pod, "volumes"));
    }

    private static Map<String, Map<String, Object>> byName(List<Map<String, Object>> items) {
        Map<String, Map<String, Object>> byName = new LinkedHashMap<>();
        items.forEach(item -> byName.put((String) item.get("name"), item));
        return byName;
    }

    /** Walks nested maps; fails with the path when a key is missing. */
    private static Object get(Map<String, Object> root, String... path) {
        Object node = root;
        for (String key : path) {
            assertThat(node).as("parent of %s", key).isInstanceOf(Map.class);
            @SuppressWarnings("unchecked")
            Map<String, Object> parent = (Map<String, Object>) node;
            assertThat(parent).as("key path %s", String.join(".", path)).containsKey(key);
            node = parent.get(key);
        }
        return node;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Map<String, Object> root, String... path) {
        return (Map<String, Object>) get(root, path);
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> list(Map<String, Object> root, String... path) {
        return (List<Map<String, Object>>) get(root, path);
    }
}
