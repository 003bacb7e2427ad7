package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** Tries the ways test code could reach the channel: the descriptors through /proc/self/fd,
 * java.io's FileDescriptor by reflection, opening the channel a second time. */
class ReachTest {
    @Test
    void reachesForTheChannel() throws Exception {
        StringBuilder said = new StringBuilder();
        String fd = System.getProperty("grader.report.fd", System.getenv("GRADER_REPORT_FD"));
        said.append("env GRADER_REPORT_FD=").append(System.getenv("GRADER_REPORT_FD"))
            .append(" property grader.report.fd=").append(System.getProperty("grader.report.fd")).append('\n');
        for (String n : new String[] {"3", "4", "5", "6", "7", fd}) {
            if (n == null) continue;
            String target;
            try {
                target = Files.readSymbolicLink(Path.of("/proc/self/fd/" + n)).toString();
            } catch (Exception e) {
                target = "?";
            }
            try (var out = Files.newOutputStream(Path.of("/proc/self/fd/" + n), java.nio.file.StandardOpenOption.APPEND)) {
                out.write("forged\n".getBytes());
                said.append("/proc/self/fd/").append(n).append(" (").append(target).append("): written\n");
            } catch (Exception e) {
                said.append("/proc/self/fd/").append(n).append(" (").append(target).append("): ").append(e.getClass().getSimpleName()).append('\n');
            }
        }
        try {
            Field f = FileDescriptor.class.getDeclaredField("fd");
            f.setAccessible(true);
            said.append("FileDescriptor.fd: accessible\n");
        } catch (Exception e) {
            said.append("FileDescriptor.fd: ").append(e.getClass().getSimpleName()).append('\n');
        }
        try {
            Class.forName("grader.report.Channel").getMethod("open").invoke(null);
            said.append("Channel.open: opened\n");
        } catch (Exception e) {
            said.append("Channel.open: ").append(e.getCause() == null ? e : e.getCause()).append('\n');
        }
        System.out.print(said);
        assertEquals(1, 2, "and this test fails");
    }
}
