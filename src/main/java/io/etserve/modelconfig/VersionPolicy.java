package io.etserve.modelconfig;

import java.util.List;
import java.util.NavigableSet;
import java.util.SortedSet;
import java.util.TreeSet;

/**
 * Which of a model's version directories load ({@code version-policy} in config.yml, as Triton's):
 * {@code all} (the default), {@code {latest: N}} (the N newest that load: {@link ModelRegistry}
 * tries versions from the highest down and one that fails does not count) or
 * {@code {specific: [1, 3]}}.
 */
public record VersionPolicy(Kind kind, int latest, List<Long> specific) {

    public enum Kind {
        ALL,
        LATEST,
        SPECIFIC
    }

    public static final VersionPolicy ALL = new VersionPolicy(Kind.ALL, 0, List.of());

    public VersionPolicy {
        specific = List.copyOf(specific);
        if (kind == Kind.LATEST && latest < 1) {
            throw new IllegalArgumentException("latest must be at least 1, got " + latest);
        }
        if (kind == Kind.SPECIFIC && specific.isEmpty()) {
            throw new IllegalArgumentException("specific needs at least one version");
        }
    }

    public static VersionPolicy latest(int n) {
        return new VersionPolicy(Kind.LATEST, n, List.of());
    }

    public static VersionPolicy specific(List<Long> versions) {
        return new VersionPolicy(Kind.SPECIFIC, 0, versions);
    }

    /** The versions of {@code available} this policy loads when every one of them loads. */
    public SortedSet<Long> select(SortedSet<Long> available) {
        return switch (kind) {
            case ALL -> new TreeSet<>(available);
            case LATEST -> {
                NavigableSet<Long> out = new TreeSet<>();
                for (Long v : new TreeSet<>(available).descendingSet()) {
                    if (out.size() == latest) {
                        break;
                    }
                    out.add(v);
                }
                yield out;
            }
            case SPECIFIC -> {
                TreeSet<Long> out = new TreeSet<>(available);
                out.retainAll(specific);
                yield out;
            }
        };
    }
}
