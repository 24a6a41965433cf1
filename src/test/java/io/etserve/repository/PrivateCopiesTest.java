package io.etserve.repository;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PrivateCopiesTest {

    @TempDir
    Path tmp;

    @Test
    void aCopyIsIndependentOfTheRepositoryAndGoneAfterClose() throws Exception {
        Path program = Files.write(tmp.resolve("model.pte"), new byte[] {1, 2, 3});
        Path data = Files.write(tmp.resolve("w.ptd"), new byte[] {4, 5});
        PrivateCopies copies = PrivateCopies.under(tmp.resolve("copies"));
        PrivateCopies.Copy copy = copies.copy("m", "1", program, List.of(data));
        Files.write(program, new byte[0]);  // truncated in place in the repository
        Files.delete(data);
        assertThat(Files.readAllBytes(copy.program())).containsExactly(1, 2, 3);
        assertThat(Files.readAllBytes(copy.dataFiles().get(0))).containsExactly(4, 5);
        assertThat(copy.directory().getParent().getFileName().toString())
                .startsWith(ProcessHandle.current().pid() + "-");
        copy.close();
        assertThat(copy.directory()).doesNotExist();
    }

    @Test
    void copiesLeftByADeadProcessAreRemovedAndTheLivingOnesKept() throws Exception {
        Path base = tmp.resolve("copies");
        Path dead = Files.createDirectories(base.resolve("2147483646-1").resolve("1-m-1"));
        Path deadEarlierLayout = Files.createDirectories(base.resolve("2147483646").resolve("1-m-1"));
        Path program = Files.write(tmp.resolve("model.pte"), new byte[] {1});
        // Another context of this process: its copies serve while a second repository starts.
        PrivateCopies.Copy mine = PrivateCopies.under(base).copy("m", "1", program, List.of());
        PrivateCopies.under(base);
        assertThat(dead.getParent()).doesNotExist();
        assertThat(deadEarlierLayout.getParent()).doesNotExist();
        assertThat(mine.program()).exists();
    }

    @Test
    void copiesOfAnEarlierProcessWithThisPidAreRemovedAndNeverCollide() throws Exception {
        // A container restarted on a /tmp that outlived it: its JVM is PID 1 again, and the
        // earlier one's copies (same model, same version, same load order) are still there.
        long pid = ProcessHandle.current().pid();
        Path base = tmp.resolve("copies");
        Path earlier = Files.createDirectories(base.resolve(pid + "-1").resolve("1-m-1"));
        Path earlierLayout = Files.createDirectories(base.resolve(Long.toString(pid)).resolve("1-m-1"));
        Path program = Files.write(tmp.resolve("model.pte"), new byte[] {1});
        try (PrivateCopies.Copy copy = PrivateCopies.under(base).copy("m", "1", program, List.of())) {
            assertThat(copy.program()).exists();
        }
        assertThat(earlier.getParent()).doesNotExist();
        assertThat(earlierLayout.getParent()).doesNotExist();
    }

    @Test
    void withoutCopiesTheRepositoryFilesServe() throws Exception {
        Path program = Files.write(tmp.resolve("model.pte"), new byte[] {1});
        try (PrivateCopies.Copy copy = PrivateCopies.none().copy("m", "1", program, List.of())) {
            assertThat(copy.program()).isEqualTo(program);
            assertThat(copy.directory()).isNull();
        }
        assertThat(program).exists();
    }
}
