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
        assertThat(copy.directory()).startsWith(tmp.resolve("copies").resolve(Long.toString(ProcessHandle.current().pid())));
        copy.close();
        assertThat(copy.directory()).doesNotExist();
    }

    @Test
    void copiesLeftByADeadProcessAreRemovedAndTheLivingOnesKept() throws Exception {
        Path base = tmp.resolve("copies");
        Path dead = Files.createDirectories(base.resolve("2147483646").resolve("1-m-1"));
        Path mine = Files.createDirectories(base.resolve(Long.toString(ProcessHandle.current().pid())).resolve("7-m-1"));
        PrivateCopies.under(base);
        assertThat(dead.getParent()).doesNotExist();
        assertThat(mine).exists();
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
