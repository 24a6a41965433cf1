package io.etserve.execution;

import io.etserve.inference.InferenceFailedException;
import java.util.Optional;

/**
 * Decides whether a request may run on a model now (its circuit breaker) and learns from its
 * outcome. The production implementation is Resilience4j's
 * (io.etserve.resilience.ResilientAdmission).
 */
public interface ModelAdmission {

    /**
     * Admits one call of a model whose instance the caller holds (so its capacity is already
     * taken care of).
     *
     * @throws ModelUnavailableException when the model's breaker is open
     */
    Admission admit(LoadedModel model) throws InterruptedException;

    /** Why the model is not taking calls now (breaker open), for readiness answers. */
    Optional<String> whyNotAdmitting(LoadedModel model);

    /** One admitted call: report exactly one outcome, then close. */
    interface Admission extends AutoCloseable {
        void succeeded(long nanos);

        /** A failure of the model or runtime, the one kind that counts against the breaker. */
        void failed(long nanos, InferenceFailedException error);

        /** An outcome of any other kind, which says nothing about the model's health (bad input). */
        void ignored();

        @Override
        void close();
    }

    ModelAdmission UNLIMITED = new ModelAdmission() {
        @Override
        public Admission admit(LoadedModel model) {
            return new Admission() {
                public void succeeded(long nanos) {}

                public void failed(long nanos, InferenceFailedException error) {}

                public void ignored() {}

                public void close() {}
            };
        }

        @Override
        public Optional<String> whyNotAdmitting(LoadedModel model) {
            return Optional.empty();
        }
    };
}
