package io.etserve.inference;

import java.util.regex.Pattern;

/** What a model or version name may be: safe as a path segment, a URL segment and a metric label. */
public final class ModelNames {

    private static final Pattern MODEL = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,127}");
    private static final Pattern VERSION = Pattern.compile("[1-9][0-9]{0,17}");

    private ModelNames() {}

    public static boolean isValidModelName(String name) {
        return name != null && MODEL.matcher(name).matches() && !name.contains("..");
    }

    public static boolean isValidVersion(String version) {
        return version != null && VERSION.matcher(version).matches();
    }
}
