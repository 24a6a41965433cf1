package io.etserve.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What the bridge reads from the reused call holder (native/src/jni_bridge.cpp reads these fields). */
class ExecutionCallTest {

    private static ExecutionInput input(int bytes) {
        return new ExecutionInput(ByteBuffer.allocateDirect(bytes), 6, new long[] {bytes / 4});
    }

    @Test
    void theStreamOptionsTravelAsTheBridgesEnumCodes() {
        ExecutionCall call = new ExecutionCall();
        call.start(List.of(), StreamSelection.cuda(0x7f00, 3, StreamSelection.CompletionWait.BLOCKING, 50, 60_000),
                OutputBuffers.ALLOCATE);
        // The bridge's StreamMode (kNone 0, kSelectOnly 1, kCuda 2) and CompletionWait (kAdaptive 0,
        // kSpin 1, kBlocking 2): native/src/bridge_core.h and completion_wait.h.
        assertThat(call.streamMode).isEqualTo(2);
        assertThat(call.completionWait).isEqualTo(2);
        assertThat(call.stream).isEqualTo(0x7f00);
        assertThat(call.device).isEqualTo(3);
        assertThat(call.sleepSliceMicros).isEqualTo(50);
        assertThat(call.waitTimeoutMillis).isEqualTo(60_000);

        call.start(List.of(), StreamSelection.selectOnly(9), OutputBuffers.ALLOCATE);
        assertThat(call.streamMode).isEqualTo(1);
        assertThat(call.completionWait).isZero();
        assertThat(call.stream).isEqualTo(9);
        call.start(List.of(), StreamSelection.cuda(1, 0, StreamSelection.CompletionWait.SPIN), OutputBuffers.ALLOCATE);
        assertThat(call.completionWait).isEqualTo(1);
        assertThat(call.waitTimeoutMillis).as("no limit unless configured").isZero();
        call.start(List.of(), StreamSelection.none(), OutputBuffers.ALLOCATE);
        assertThat(call.streamMode).isZero();
    }

    @Test
    void inputsAreHandedOverAsTheyAreInOneReusedArray() {
        ExecutionCall call = new ExecutionCall();
        ExecutionInput a = input(16);
        ExecutionInput b = input(8);
        call.start(List.of(a, b), StreamSelection.none(), OutputBuffers.ALLOCATE);
        assertThat(call.inputCount).isEqualTo(2);
        assertThat(call.inputs[0]).isSameAs(a);
        assertThat(call.inputs[1]).isSameAs(b);
        ExecutionInput[] held = call.inputs;
        call.finish();

        call.start(List.of(b), StreamSelection.none(), OutputBuffers.ALLOCATE);
        assertThat(call.inputs).isSameAs(held);
        assertThat(call.inputCount).isEqualTo(1);
        assertThat(call.inputs[0]).isSameAs(b);
    }

    @Test
    void anInputWhoseBufferWasReadFromGoesAsItsRemainingWindow() {
        ExecutionCall call = new ExecutionCall();
        ByteBuffer data = ByteBuffer.allocateDirect(16);
        data.putInt(0, 11).putInt(4, 22).putInt(8, 33).putInt(12, 44);
        ExecutionInput moved = new ExecutionInput(data, 6, new long[] {2});
        moved.data().position(8);
        call.start(List.of(moved), StreamSelection.none(), OutputBuffers.ALLOCATE);
        ExecutionInput handed = call.inputs[0];
        assertThat(handed).isNotSameAs(moved);
        // The bridge reads from the buffer's address: the window starts at the old position.
        assertThat(handed.data().position()).isZero();
        assertThat(handed.data().capacity()).isEqualTo(8);
        assertThat(handed.data().getInt(0)).isEqualTo(33);
        assertThat(handed.scalarType()).isEqualTo(6);
        assertThat(handed.shape()).containsExactly(2);
    }

    @Test
    void finishingLetsGoOfTheRequestsMemory() {
        ExecutionCall call = new ExecutionCall();
        call.start(List.of(input(4), input(4)), StreamSelection.none(), OutputBuffers.ALLOCATE);
        call.finish();
        assertThat(call.inputs).containsOnlyNulls();
        assertThat(call.inputCount).isZero();
        assertThat(call.buffers).isNull();

        // A call refused half-way through its inputs lets go of those it had taken too.
        assertThatThrownBy(() -> call.start(Arrays.asList(input(4), null), StreamSelection.none(),
                OutputBuffers.ALLOCATE)).isInstanceOf(NullPointerException.class);
        call.finish();
        assertThat(call.inputs).containsOnlyNulls();
    }

    @Test
    void theWaitOutcomeIsNoneUntilTheBridgeWritesOne() {
        ExecutionCall call = new ExecutionCall();
        call.waitEnded = CompletionWaits.Ended.IN_SPIN.ordinal();
        call.start(List.of(), StreamSelection.none(), OutputBuffers.ALLOCATE);
        assertThat(call.waitEnded()).isEqualTo(CompletionWaits.Ended.NONE);
        // The bridge's Ended codes, in order (native/src/completion_wait.h).
        int[] codes = {0, 1, 2, 3, 4, 5, -1};
        CompletionWaits.Ended[] expected = {CompletionWaits.Ended.NONE, CompletionWaits.Ended.AT_START,
                CompletionWaits.Ended.OVERSLEPT, CompletionWaits.Ended.IN_SPIN, CompletionWaits.Ended.IN_BACKOFF,
                CompletionWaits.Ended.NONE, CompletionWaits.Ended.NONE};
        for (int i = 0; i < codes.length; i++) {
            call.waitEnded = codes[i];
            assertThat(call.waitEnded()).as("code %d", codes[i]).isEqualTo(expected[i]);
        }
    }
}
