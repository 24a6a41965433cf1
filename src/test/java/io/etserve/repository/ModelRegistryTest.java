package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.etserve.execution.InferenceObserver;
import io.etserve.inference.ModelNotFoundException;
import io.etserve.support.ModelRepositoryFixture;
import io.etserve.support.TestPaths;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A repository as an operator lays it out, loaded by the real loader: versions, names, a bad file. */
class ModelRegistryTest {

    static ModelRegistry registry;

    @BeforeAll
    static void load() throws IOException {
        ModelRepositoryFixture repo = ModelRepositoryFixture.create("etserve-registry-")
                .copy(TestPaths.demoModels(), "demo-portable")
                .copy(TestPaths.demoModels(), "demo-portable", "two-versions")
                .withProgramBytes("corrupt", "not a program".getBytes());
        Path v1 = repo.root().resolve("two-versions/1/model.pte");
        Files.createDirectories(repo.root().resolve("two-versions/3"));
        Files.copy(v1, repo.root().resolve("two-versions/3/model.pte"));
        // the same two versions under each version policy
        for (String[] policy : new String[][] {{"latest-one", "{ latest: 1 }"}, {"only-first", "{ specific: [1] }"},
                {"none-selected", "{ specific: [2] }"}}) {
            repo.copy(repo.root(), "two-versions", policy[0]);
            Files.writeString(repo.root().resolve(policy[0] + "/config.yml"), "version-policy: " + policy[1] + "\n");
        }
        // versions 1 and 2 load, the newest (3) does not, under each policy
        for (String[] policy : new String[][] {{"newest-fails-all", null}, {"newest-fails-latest-one", "{ latest: 1 }"},
                {"newest-fails-latest-two", "{ latest: 2 }"}}) {
            repo.copy(repo.root(), "two-versions", policy[0]);
            Files.createDirectories(repo.root().resolve(policy[0] + "/2"));
            Files.copy(v1, repo.root().resolve(policy[0] + "/2/model.pte"));
            Files.writeString(repo.root().resolve(policy[0] + "/3/model.pte"), "not a program");
            if (policy[1] != null) {
                Files.writeString(repo.root().resolve(policy[0] + "/config.yml"), "version-policy: " + policy[1] + "\n");
            }
        }
        registry = new ModelRegistry(repo.root(), CpuModelLoaders.create(), InferenceObserver.NONE);
        registry.loadAll();
    }

    @AfterAll
    static void close() {
        registry.close();
    }

    @Test
    void noVersionMeansTheHighestAndVersionsListAscending() {
        assertThat(registry.resolve("two-versions", null).version()).isEqualTo("3");
        assertThat(registry.resolve("two-versions", "1").version()).isEqualTo("1");
        assertThat(registry.versions("two-versions")).containsExactly("1", "3");
        assertThat(registry.resolve("two-versions", "3").ready()).isTrue();
    }

    @Test
    void unknownNamesAndVersionsAreNotFoundAndNeverAPathLookup() {
        assertThatThrownBy(() -> registry.resolve("nope", null)).isInstanceOf(ModelNotFoundException.class)
                .hasMessageContaining("'nope'");
        assertThatThrownBy(() -> registry.resolve("two-versions", "2")).isInstanceOf(ModelNotFoundException.class)
                .hasMessageContaining("version '2'");
        assertThatThrownBy(() -> registry.resolve("../demo-portable", null)).isInstanceOf(ModelNotFoundException.class);
        assertThatThrownBy(() -> registry.resolve("demo-portable", "../1")).isInstanceOf(ModelNotFoundException.class);
    }

    @Test
    void theVersionPolicyDecidesWhichVersionsLoad() {
        assertThat(registry.versions("latest-one")).containsExactly("3");
        assertThat(registry.versions("only-first")).containsExactly("1");
        assertThat(registry.resolve("only-first", null).ready()).isTrue();
        ModelVersionState none = registry.resolve("none-selected", null);
        assertThat(none.ready()).isFalse();
        assertThat(none.notReadyReason()).hasValueSatisfying(r -> assertThat(r).contains("selects none of the versions [1, 3]"));
        assertThatThrownBy(() -> registry.serving("none-selected", null))
                .hasMessageStartingWith("model 'none-selected' is not ready: version-policy selects none");
    }

    List<String> index(String model) {
        return registry.states().stream().filter(s -> s.name().equals(model)).map(s -> s.version() + " " + s.status())
                .toList();
    }

    @Test
    void aNewestVersionThatFailsNeverAnswersForTheModel() {
        assertThat(index("newest-fails-all")).containsExactly("1 READY", "2 READY", "3 FAILED");
        assertThat(registry.resolve("newest-fails-all", null).version()).isEqualTo("2");
        // latest: N keeps the N newest versions that load (Triton's choice); the failed one stays listed
        assertThat(index("newest-fails-latest-one")).containsExactly("2 READY", "3 FAILED");
        assertThat(registry.resolve("newest-fails-latest-one", null).version()).isEqualTo("2");
        assertThat(index("newest-fails-latest-two")).containsExactly("1 READY", "2 READY", "3 FAILED");
        assertThat(registry.resolve("newest-fails-latest-one", "3").notReadyReason().orElseThrow()).contains("model.pte");
        assertThat(registry.notServing()).containsExactly("corrupt", "none-selected");
    }

    @Test
    void aFileThatIsNotAProgramFailsAloneWithItsReason() {
        ModelVersionState corrupt = registry.resolve("corrupt", null);
        assertThat(corrupt.ready()).isFalse();
        assertThat(corrupt).isInstanceOf(ModelVersionState.Failed.class);
        assertThat(corrupt.description()).isEmpty();
        assertThat(corrupt.notReadyReason().orElseThrow()).contains("model.pte");
        assertThat(registry.resolve("demo-portable", null).ready()).isTrue();
        assertThat(registry.modelNames()).containsExactlyInAnyOrder("corrupt", "demo-portable", "two-versions",
                "latest-one", "only-first", "none-selected", "newest-fails-all", "newest-fails-latest-one",
                "newest-fails-latest-two");
    }
}
