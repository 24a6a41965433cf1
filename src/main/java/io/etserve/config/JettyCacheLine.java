package io.etserve.config;

/**
 * Tells Jetty how many object references fit in a cache line before Jetty works it out itself.
 * Jetty's {@code MemoryUtils} (behind every thread pool's queue) asks the platform MBean server
 * whether compressed references are on, and that server is made for nothing else in this
 * service, on the main thread while the web server is made (its cost:
 * bench/results/2026-12-05-startup-class-preload.md). The size of an array's reference slot
 * says the same: 4 bytes with compressed references, 8 without. A value the user set
 * ({@value #REFERENCES}) stands; when the slot size cannot be read, Jetty asks as before.
 */
public final class JettyCacheLine {

    static final String REFERENCES = "org.eclipse.jetty.util.referencesPerCacheLine";
    static final String CACHE_LINE_BYTES = "org.eclipse.jetty.util.cacheLineBytes";
    /** Jetty's default, used when {@value #CACHE_LINE_BYTES} is not set. */
    private static final int DEFAULT_CACHE_LINE_BYTES = 64;

    private JettyCacheLine() {
    }

    /** Sets {@value #REFERENCES} unless it is set; call before any Jetty class is initialized. */
    public static void preset() {
        if (System.getProperty(REFERENCES) == null) {
            int references = references(System.getProperty(CACHE_LINE_BYTES), referenceBytes());
            if (references > 0) {
                System.setProperty(REFERENCES, Integer.toString(references));
            }
        }
    }

    /**
     * As Jetty computes it: the cache line's bytes (its setting, else 64, as Jetty falls back when
     * the setting does not parse) over a reference's; 0 when that leaves no whole reference.
     */
    static int references(String cacheLineBytes, int referenceBytes) {
        int line = DEFAULT_CACHE_LINE_BYTES;
        if (cacheLineBytes != null) {
            try {
                line = Integer.parseInt(cacheLineBytes);
            } catch (NumberFormatException e) {
                // Jetty keeps its default
            }
        }
        return referenceBytes > 0 && line >= referenceBytes ? line / referenceBytes : 0;
    }

    /** The bytes of a reference in an object array, or -1 where the JDK does not say. */
    static int referenceBytes() {
        try {
            // A public constant of the jdk.unsupported module; read reflectively, as nothing
            // else of that class is used.
            return Class.forName("sun.misc.Unsafe").getField("ARRAY_OBJECT_INDEX_SCALE").getInt(null);
        } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
            return -1;
        }
    }
}
