package io.etserve.rest;

import static org.assertj.core.api.Assertions.assertThat;

import io.etserve.support.Http;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.mvc.method.RequestMappingInfo;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;
import org.yaml.snakeyaml.Yaml;

/**
 * The OpenAPI document the service serves ({@code /openapi.yaml}) is the API the controllers
 * map: every operation of {@link InferenceProtocolController}, {@link RepositoryController},
 * {@link TritonExtensionsController} and {@link SharedMemoryController}
 * is described, nothing else is,
 * and every reference in it resolves.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class OpenApiDocumentTest {

    static final ModelRepositoryFixture REPO = ModelRepositoryFixture.create("etserve-openapi-")
            .copy(TestPaths.demoModels(), "demo-portable");

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        r.add("etserve.model-repository", () -> REPO.root().toString());
        r.add("management.server.port", () -> "0");
    }

    @Value("${local.server.port}")
    int port;

    @Autowired
    @Qualifier("requestMappingHandlerMapping")
    RequestMappingHandlerMapping mappings;

    @Test
    @SuppressWarnings("unchecked")
    void theServedDocumentDescribesExactlyTheControllersOperations() {
        Http.Response r = Http.local(port).get("/openapi.yaml");
        assertThat(r.status()).isEqualTo(200);
        Map<String, Object> doc = new Yaml().load(r.text());
        assertThat(doc.get("openapi")).isEqualTo("3.0.3");

        Set<String> documented = new TreeSet<>();
        ((Map<String, Map<String, Object>>) doc.get("paths")).forEach((path, ops) -> ops.keySet()
                .forEach(method -> documented.add(method.toUpperCase() + " " + path)));

        Set<String> mapped = new TreeSet<>();
        for (Map.Entry<RequestMappingInfo, HandlerMethod> e : mappings.getHandlerMethods().entrySet()) {
            if (e.getValue().getBeanType() != InferenceProtocolController.class
                    && e.getValue().getBeanType() != RepositoryController.class
                    && e.getValue().getBeanType() != TritonExtensionsController.class
                    && e.getValue().getBeanType() != SharedMemoryController.class) {
                continue;
            }
            for (String pattern : e.getKey().getPatternValues()) {
                String path = pattern.length() > 1 && pattern.endsWith("/") ? pattern.substring(0, pattern.length() - 1)
                        : pattern;
                e.getKey().getMethodsCondition().getMethods().forEach(m -> mapped.add(m.name() + " " + path));
            }
        }
        assertThat(mapped).isNotEmpty();
        assertThat(documented).isEqualTo(mapped);

        List<String> refs = new ArrayList<>();
        collectRefs(doc, refs);
        assertThat(refs).isNotEmpty();
        for (String ref : refs) {
            assertThat(ref).startsWith("#/");
            Object node = doc;
            for (String part : ref.substring(2).split("/")) {
                node = node instanceof Map<?, ?> m ? m.get(part) : null;
            }
            assertThat(node).as("%s resolves", ref).isNotNull();
        }
    }

    @Test
    void inStartupModeTheIndexAnswersAndExplicitLoadIsRefused() {
        Http http = Http.local(port);
        Http.Response index = http.post("/v2/repository/index", "");
        assertThat(index.status()).isEqualTo(200);
        assertThat(index.text()).contains("\"name\":\"demo-portable\"").contains("\"state\":\"READY\"");
        Http.Response load = http.post("/v2/repository/models/demo-portable/load", "");
        assertThat(load.status()).isEqualTo(400);
        assertThat(load.json().path("error").asString()).contains("etserve.repository.mode is startup");
    }

    private static void collectRefs(Object node, List<String> refs) {
        if (node instanceof Map<?, ?> m) {
            m.forEach((k, v) -> {
                if ("$ref".equals(k)) {
                    refs.add((String) v);
                } else {
                    collectRefs(v, refs);
                }
            });
        } else if (node instanceof List<?> l) {
            l.forEach(v -> collectRefs(v, refs));
        }
    }
}
