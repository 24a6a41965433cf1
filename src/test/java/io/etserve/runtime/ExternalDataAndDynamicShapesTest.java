package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.etserve.support.Reference;
import io.etserve.support.TestPaths;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Programs as users export them: weights in a .ptd, a dynamic batch dimension. */
class ExternalDataAndDynamicShapesTest {

    private static final int FLOAT = 6;
    private static final Path PORTABLE = TestPaths.testModels().resolve("external-weights-portable/1");
    private static final Path XNNPACK = TestPaths.testModels().resolve("external-weights-xnnpack/1");
    private static final Path DYNAMIC = TestPaths.testModels().resolve("dynamic-batch/1");

    static void assertMatchesReference(Program program, Path dir) {
        Reference ref = Reference.load(dir.resolve("reference.json"));
        assertThat(ref.cases()).isNotEmpty();
        try (ProgramInstance instance = program.newInstance("forward")) {
            for (Reference.Case c : ref.cases()) {
                Reference.TensorValue in = c.inputs().get(0);
                List<ExecutionOutput> outs = instance.execute(
                        List.of(new ExecutionInput(ProgramTest.direct(in.data()), FLOAT, in.shape())),
                        StreamSelection.none());
                Reference.TensorValue expected = c.outputs().get(0);
                assertThat(outs.get(0).shape()).containsExactly(expected.shape());
                float[] got = ProgramTest.floats(outs.get(0).toArray());
                assertThat(got).hasSize(expected.data().size());
                for (int i = 0; i < got.length; i++) {
                    double want = expected.data().get(i);
                    assertThat((double) got[i]).isCloseTo(want, within(ref.atol() + ref.rtol() * Math.abs(want)));
                }
            }
        }
    }

    @Test
    void weightsFromAPtdMatchPyTorchPortableAndXnnpack() {
        try (Program p = Program.load(PORTABLE.resolve("model.pte"), Program.Verification.INTERNAL_CONSISTENCY,
                List.of(PORTABLE.resolve("_default_external_constant.ptd")))) {
            assertMatchesReference(p, PORTABLE);
        }
        try (Program p = Program.load(XNNPACK.resolve("model.pte"), Program.Verification.INTERNAL_CONSISTENCY,
                List.of(XNNPACK.resolve("model.ptd")))) {
            assertThat(p.signature("forward").backends()).containsExactly("XnnpackBackend");
            assertMatchesReference(p, XNNPACK);
        }
    }

    @Test
    void severalInstancesShareOneDataMapThatOutlivesTheProgramObject() {
        Program p = Program.load(PORTABLE.resolve("model.pte"), Program.Verification.MINIMAL,
                List.of(PORTABLE.resolve("_default_external_constant.ptd")));
        ProgramInstance a = p.newInstance("forward");
        ProgramInstance b = p.newInstance("forward");
        p.close();
        // The instances keep the program and its mapping alive (shared_ptr in the bridge).
        Reference ref = Reference.load(PORTABLE.resolve("reference.json"));
        Reference.TensorValue in = ref.cases().get(0).inputs().get(0);
        for (ProgramInstance instance : List.of(a, b)) {
            float[] got = ProgramTest.floats(instance.execute(
                    List.of(new ExecutionInput(ProgramTest.direct(in.data()), FLOAT, in.shape())),
                    StreamSelection.none()).get(0).toArray());
            assertThat((double) got[0]).isCloseTo(ref.cases().get(0).outputs().get(0).data().get(0), within(1e-4));
            instance.close();
        }
    }

    @Test
    void withoutItsDataFileTheMethodFailsWithASentenceSayingSo() {
        try (Program p = Program.load(PORTABLE.resolve("model.pte"), Program.Verification.MINIMAL)) {
            assertThatThrownBy(() -> p.newInstance("forward")).isInstanceOf(ExecuTorchException.class)
                    .hasMessageContaining("cannot load method 'forward'").hasMessageContaining(".ptd");
        }
    }

    @Test
    void aDataFileWithoutTheKeysNamesTheFile() {
        // The XNNPACK program's keys are not in the portable program's data file.
        Path wrong = PORTABLE.resolve("_default_external_constant.ptd");
        try (Program p = Program.load(XNNPACK.resolve("model.pte"), Program.Verification.MINIMAL, List.of(wrong))) {
            assertThatThrownBy(() -> p.newInstance("forward")).isInstanceOf(ExecuTorchException.class)
                    .hasMessageContaining("cannot load method 'forward'")
                    .hasMessageContaining(wrong.toAbsolutePath().toString());
        }
    }

    @Test
    void missingOrInvalidDataFilesFailTheLoad() {
        Path missing = PORTABLE.resolve("nope.ptd");
        assertThatThrownBy(() -> Program.load(PORTABLE.resolve("model.pte"), Program.Verification.MINIMAL,
                List.of(missing))).isInstanceOf(ExecuTorchException.class)
                .hasMessageContaining("no such data file").hasMessageContaining("nope.ptd");
        Path notPtd = PORTABLE.resolve("reference.json");
        assertThatThrownBy(() -> Program.load(PORTABLE.resolve("model.pte"), Program.Verification.MINIMAL,
                List.of(notPtd))).isInstanceOf(ExecuTorchException.class)
                .hasMessageContaining("cannot read data file").hasMessageContaining("reference.json");
    }

    @Test
    void severalDataFilesAreMerged() {
        // Both files together: the portable program finds its keys in the merged map.
        try (Program p = Program.load(PORTABLE.resolve("model.pte"), Program.Verification.MINIMAL,
                List.of(XNNPACK.resolve("model.ptd"), PORTABLE.resolve("_default_external_constant.ptd")))) {
            assertMatchesReference(p, PORTABLE);
        }
    }

    @Test
    void aDynamicBatchReportsItsBoundAndDynamismAndRunsSmallerBatches() {
        try (Program p = Program.load(DYNAMIC.resolve("model.pte"), Program.Verification.INTERNAL_CONSISTENCY)) {
            // MethodMeta alone reports the upper bound as if it were fixed.
            assertThat(p.signature("forward").inputs().get(0).sizes()).containsExactly(32, 16);
            try (ProgramInstance i = p.newInstance("forward")) {
                TensorSpec in = i.signature().inputs().get(0);
                assertThat(in.dynamic()).isTrue();
                assertThat(in.sizes()).containsExactly(32, 16);
                assertThat(i.signature().outputs().get(0).dynamic()).isTrue();
            }
            assertMatchesReference(p, DYNAMIC);  // batches 3, 1 and 32
        }
        try (Program p = Program.load(TestPaths.demoModels().resolve("demo-portable/1/model.pte"),
                Program.Verification.MINIMAL); ProgramInstance i = p.newInstance("forward")) {
            assertThat(i.signature().inputs().get(0).dynamic()).isFalse();
        }
    }
}
