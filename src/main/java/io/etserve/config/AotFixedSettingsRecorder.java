package io.etserve.config;

import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.Properties;
import org.springframework.beans.factory.aot.BeanFactoryInitializationAotContribution;
import org.springframework.beans.factory.aot.BeanFactoryInitializationAotProcessor;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.core.env.Environment;

/**
 * At build time ({@code spring-boot:process-aot}), writes the values of {@link AotFixedSettings}
 * that the generated bean definitions were built with into the jar, for the check at startup.
 * Registered in {@code META-INF/spring/aot.factories}.
 */
final class AotFixedSettingsRecorder implements BeanFactoryInitializationAotProcessor {

    @Override
    public BeanFactoryInitializationAotContribution processAheadOfTime(ConfigurableListableBeanFactory beanFactory) {
        if (beanFactory.getParentBeanFactory() != null) {
            return null;  // the management port's child context: the root context records for both
        }
        Properties values = new Properties();
        AotFixedSettings.read(beanFactory.getBean(Environment.class)).forEach(values::setProperty);
        StringWriter text = new StringWriter();
        try {
            values.store(text, "the settings the AOT bean definitions were built with (AotFixedSettings)");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return (generationContext, code) -> generationContext.getGeneratedFiles()
                .addResourceFile(AotFixedSettings.RESOURCE, text.toString());
    }
}
