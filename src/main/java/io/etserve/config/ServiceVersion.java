package io.etserve.config;

/** The service's version: the jar's Implementation-Version, "dev" outside a jar. */
public final class ServiceVersion {

    private ServiceVersion() {}

    /** What server metadata says over both protocols, and what {@code --version} prints. */
    public static String current() {
        String version = ServiceVersion.class.getPackage().getImplementationVersion();
        return version == null ? "dev" : version;
    }
}
