package io.etserve.support;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;

/** Free TCP ports for a process the test starts (the packaged jar, the image). */
public final class FreePorts {

    private FreePorts() {}

    /**
     * {@code n} distinct free ports, all held open while they are chosen: a port closed before
     * the next is asked for may be handed out again (two services of one process on one port).
     */
    public static int[] take(int n) {
        List<ServerSocket> held = new ArrayList<>();
        try {
            int[] ports = new int[n];
            for (int i = 0; i < n; i++) {
                ServerSocket s = new ServerSocket(0);
                held.add(s);
                ports[i] = s.getLocalPort();
            }
            return ports;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            for (ServerSocket s : held) {
                try {
                    s.close();
                } catch (IOException ignored) {
                    // a listening socket of our own: nothing to do
                }
            }
        }
    }
}
