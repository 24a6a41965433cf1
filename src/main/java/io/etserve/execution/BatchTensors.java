package io.etserve.execution;

import io.etserve.runtime.DirectBufferPool;
import io.etserve.runtime.ExecutionInput;
import io.etserve.runtime.ExecutionOutput;
import io.etserve.runtime.OutputBuffers;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Joins a batch's inputs along dimension 0 and cuts its outputs back into each request's share.
 * Copies: each request's input bytes once into the batch's buffer, and each output's rows once
 * from the batch's buffer into the request's own (so nothing a response holds aliases memory
 * another request releases). Batch buffers come from the pool and go back when the batch ends.
 */
final class BatchTensors implements OutputBuffers, AutoCloseable {

    private final DirectBufferPool pool;
    private final List<ByteBuffer> taken = new ArrayList<>();

    BatchTensors(DirectBufferPool pool) {
        this.pool = pool;
    }

    /** Input {@code j} of every member, one after the other, as one tensor of all the rows. */
    List<ExecutionInput> concatenate(List<DynamicBatcher.Member> members, int rows) {
        List<ExecutionInput> first = members.get(0).inputs;
        List<ExecutionInput> joined = new ArrayList<>(first.size());
        for (int j = 0; j < first.size(); j++) {
            long bytes = 0;
            for (DynamicBatcher.Member m : members) {
                bytes += m.inputs.get(j).data().remaining();
            }
            ByteBuffer all = allocate(j, bytes);
            for (DynamicBatcher.Member m : members) {
                all.put(m.inputs.get(j).data().duplicate());  // copy in: request -> batch
            }
            all.flip();
            long[] shape = first.get(j).shape().clone();
            shape[0] = rows;
            joined.add(new ExecutionInput(all, first.get(j).scalarType(), shape));
        }
        return joined;
    }

    /**
     * Member {@code index}'s rows of every output, copied into buffers from its own
     * {@link OutputBuffers}.
     *
     * @throws IllegalStateException when an output is not batched along dimension 0
     */
    static List<ExecutionOutput> share(List<ExecutionOutput> outputs, int batchRows, int firstRow, int rows,
            OutputBuffers into) {
        List<ExecutionOutput> mine = new ArrayList<>(outputs.size());
        for (int i = 0; i < outputs.size(); i++) {
            ExecutionOutput out = outputs.get(i);
            long[] shape = out.shape().clone();
            long bytes = out.data().remaining();
            if (shape.length == 0 || shape[0] != batchRows || bytes % batchRows != 0) {
                throw new IllegalStateException("output " + i + " has shape " + Arrays.toString(shape)
                        + " for a batch of " + batchRows + " rows; dynamic batching needs every output batched along"
                        + " dimension 0");
            }
            long rowBytes = bytes / batchRows;
            ByteBuffer dst = into.allocate(i, rows * rowBytes);
            dst.position(0).limit(Math.toIntExact(rows * rowBytes));
            dst.put(out.data().slice(Math.toIntExact(firstRow * rowBytes), Math.toIntExact(rows * rowBytes)));  // copy out: batch -> request
            dst.flip();
            shape[0] = rows;
            mine.add(new ExecutionOutput(out.scalarType(), shape, dst));
        }
        return mine;
    }

    /** The batch's own output buffers (the bridge copies the Module's outputs into them). */
    @Override
    public ByteBuffer allocate(int output, long bytes) {
        ByteBuffer b = pool.acquire(bytes);
        taken.add(b);
        return b;
    }

    @Override
    public void close() {
        taken.forEach(pool::release);
        taken.clear();
    }
}
