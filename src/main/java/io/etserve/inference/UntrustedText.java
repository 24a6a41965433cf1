package io.etserve.inference;

/** Untrusted text (names, keys, values a client or a config file sent) made safe to quote in a message or a log line. */
public final class UntrustedText {

    private UntrustedText() {}

    /**
     * A client-supplied name for a message: at most 64 code points, readable text kept (a model
     * named in any script reads back as sent), control and invisible formatting characters
     * (line breaks, bidi overrides, unpaired surrogates) escaped as {@code \\uXXXX} so a name
     * cannot forge log lines or reorder the message around it.
     */
    public static String abbreviate(String s) {
        return abbreviate(s, 64);
    }

    /** As {@link #abbreviate(String)}, keeping up to {@code max} code points. */
    public static String abbreviate(String s, int max) {
        if (s == null) {
            return "";
        }
        StringBuilder out = new StringBuilder();
        int[] cps = s.codePoints().limit(max + 1L).toArray();
        for (int i = 0; i < Math.min(max, cps.length); i++) {
            int cp = cps[i];
            int type = Character.getType(cp);
            if (Character.isISOControl(cp) || type == Character.FORMAT || type == Character.SURROGATE
                    || type == Character.UNASSIGNED || type == Character.LINE_SEPARATOR
                    || type == Character.PARAGRAPH_SEPARATOR) {
                out.append(String.format("\\u%04X", cp));
            } else {
                out.appendCodePoint(cp);
            }
        }
        return cps.length > max ? out + "..." : out.toString();
    }
}
