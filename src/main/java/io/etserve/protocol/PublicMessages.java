package io.etserve.protocol;

import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * Messages for the public port, without the server's file system layout: model paths are shown
 * relative to the model repository. The full text (absolute paths, native logs) stays in the
 * log and on the management port's health details.
 */
public final class PublicMessages {

    private final Set<String> prefixes = new LinkedHashSet<>();

    public PublicMessages(Path modelRepository) {
        Path absolute = modelRepository.toAbsolutePath().normalize();
        prefixes.add(absolute + "/");
        prefixes.add(absolute.toString());
        try {
            Path real = absolute.toRealPath();
            prefixes.add(real + "/");
            prefixes.add(real.toString());
        } catch (IOException missing) {
            // No repository on disk: nothing under it can appear in a message either.
        }
    }

    public String redact(String message) {
        if (message == null) {
            return null;
        }
        String out = message;
        for (String prefix : prefixes) {
            out = out.replace(prefix, prefix.endsWith("/") ? "" : "<model repository>");
        }
        return out;
    }
}
