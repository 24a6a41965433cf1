package io.etserve.sharedmemory;

import io.etserve.inference.UntrustedText;
import java.nio.ByteBuffer;

/**
 * One registered region, of either kind, and the requests using it: a region unregistered while
 * requests use it is released when the last of them is done.
 */
abstract class Region {

    final String name;
    final String shownName;
    final long byteSize;
    private int users;  // guarded by this
    private boolean unregistered;  // guarded by this

    Region(String name, long byteSize) {
        this.name = name;
        this.shownName = UntrustedText.abbreviate(name);
        this.byteSize = byteSize;
    }

    /** Whether it is CUDA shared memory (device memory of another process), not system shared memory. */
    abstract boolean cuda();

    /** Fills {@code into} (its remaining bytes) from {@code at} bytes into the region. */
    abstract void read(String label, ByteBuffer into, long at);

    /** Writes {@code from}'s remaining bytes at {@code at} bytes into the region. */
    abstract void write(String label, ByteBuffer from, long at);

    /** Gives back what the registration opened; once, when it is unregistered and unused. */
    abstract void release();

    /** False once unregistered: the region is gone for new requests. */
    final synchronized boolean use() {
        if (unregistered) {
            return false;
        }
        users++;
        return true;
    }

    final synchronized void done() {
        if (--users == 0 && unregistered) {
            release();
        }
    }

    final synchronized void unregister() {
        unregistered = true;
        if (users == 0) {
            release();
        }
    }
}
