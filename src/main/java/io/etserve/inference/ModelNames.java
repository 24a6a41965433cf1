package io.etserve.inference;

/**
 * What a model or version name may be: safe as a path segment, a URL segment and a metric label.
 * Checked on every request, so by hand rather than by a regular expression's matcher.
 */
public final class ModelNames {

    private static final int MAX_MODEL = 128;
    private static final int MAX_VERSION = 18;

    private ModelNames() {}

    /** {@code [A-Za-z0-9][A-Za-z0-9._-]{0,127}} without "..". */
    public static boolean isValidModelName(String name) {
        if (name == null || name.isEmpty() || name.length() > MAX_MODEL || !isAlphanumeric(name.charAt(0))) {
            return false;
        }
        for (int i = 1; i < name.length(); i++) {
            char c = name.charAt(i);
            if (!isNameChar(c) || c == '.' && name.charAt(i - 1) == '.') {
                return false;
            }
        }
        return true;
    }

    /** {@code [1-9][0-9]{0,17}}. */
    public static boolean isValidVersion(String version) {
        if (version == null || version.isEmpty() || version.length() > MAX_VERSION || version.charAt(0) == '0') {
            return false;
        }
        for (int i = 0; i < version.length(); i++) {
            if (!isDigit(version.charAt(i))) {
                return false;
            }
        }
        return true;
    }

    /** A character a model name may hold after its first: {@code [A-Za-z0-9._-]}. */
    public static boolean isNameChar(char c) {
        return isAlphanumeric(c) || c == '.' || c == '_' || c == '-';
    }

    public static boolean isAlphanumeric(char c) {
        return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c);
    }

    public static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }
}
