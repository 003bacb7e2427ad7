package grader.report;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.reflect.Field;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The report channel of the grader (CONTRACT.md, "Integrity"): records written one per line
 * as {@code <json>\t<mac>\n} to the inherited pipe, each signed with HMAC-SHA256 keyed by the
 * run's secret and chained over the previous record's mac in this session.
 *
 * <p>The descriptors come as numbers: {@code GRADER_REPORT_FD} / {@code GRADER_KEY_FD} in the
 * environment, or the system properties {@code grader.report.fd} / {@code grader.key.fd}
 * (junit-run moves them there and removes the variables before the JVM starts, because a
 * JVM cannot remove a variable from its own environment). Re-opening {@code /proc/self/fd/N}
 * does not work here: the pipe and the key file belong to root with mode 0600, and the test
 * process runs as uid 1000, so the open is refused; the numbers are wrapped in
 * {@link FileDescriptor}s instead, which needs java.io opened to this module only.
 *
 * <p>The channel can be opened once per JVM, and only the class that opened it can write:
 * test code that calls {@link #open} again gets an exception, and test code that gets hold of
 * the instance cannot sign with it.
 */
public final class Channel {
    private static final Object LOCK = new Object();
    private static boolean taken;

    private final byte[] key;
    private final FileOutputStream out;
    private final String session;
    private final Class<?> owner;
    private byte[] prev = new byte[0];
    private boolean ended;

    private Channel(byte[] key, FileOutputStream out, Class<?> owner) {
        this.key = key;
        this.out = out;
        this.owner = owner;
        byte[] sid = new byte[8];
        new SecureRandom().nextBytes(sid);
        this.session = hex(sid);
    }

    /** Whether this JVM was given a report channel at all (the variables or the properties). */
    public static boolean configured() {
        return number("GRADER_REPORT_FD", "grader.report.fd") != null;
    }

    /**
     * Opens the channel: reads the key with positional reads at offset 0 (pread), closes the
     * key descriptor, keeps the report descriptor. Once per JVM; the caller's class becomes
     * the only one allowed to {@link #emit}.
     */
    public static Channel open() throws IOException {
        Class<?> caller = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE).getCallerClass();
        synchronized (LOCK) {
            if (taken) {
                throw new IllegalStateException("the report channel of this JVM is already open");
            }
            taken = true;
        }
        Integer reportFd = number("GRADER_REPORT_FD", "grader.report.fd");
        Integer keyFd = number("GRADER_KEY_FD", "grader.key.fd");
        if (reportFd == null || keyFd == null) {
            throw new IOException("no report channel: GRADER_REPORT_FD / GRADER_KEY_FD are not set");
        }
        byte[] secret;
        try (FileInputStream in = new FileInputStream(descriptor(keyFd))) {
            secret = preadAll(in.getChannel());
        } // closing the stream closes the key descriptor
        System.clearProperty("grader.key.fd");
        System.clearProperty("grader.report.fd");
        if (secret.length < 32) {
            throw new IOException("the key descriptor holds " + secret.length + " bytes, fewer than 32");
        }
        return new Channel(Arrays.copyOf(secret, 32), new FileOutputStream(descriptor(reportFd)), caller);
    }

    /** This session's id (16 hex characters). */
    public String session() {
        return session;
    }

    /**
     * Writes one signed record (the given fields plus {@code "s"}). Only the class that opened
     * the channel may call this. Nothing is written after an {@code "end"} record.
     */
    public void emit(Map<String, ?> record) throws IOException {
        Class<?> caller = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE).getCallerClass();
        if (caller != owner) {
            throw new SecurityException("only " + owner.getName() + " writes to the report channel");
        }
        synchronized (this) {
            if (ended) {
                return;
            }
            TreeMap<String, Object> sorted = new TreeMap<>(record);
            sorted.put("s", session);
            String json = Json.encode(sorted);
            byte[] body = json.getBytes(StandardCharsets.US_ASCII);
            String mac = hmac(body);
            prev = mac.getBytes(StandardCharsets.US_ASCII);
            byte[] line = (json + "\t" + mac + "\n").getBytes(StandardCharsets.US_ASCII);
            out.write(line);
            out.flush();
            if ("end".equals(record.get("t"))) {
                ended = true;
            }
        }
    }

    /** Seconds rounded to 4 places, as a JSON number. */
    public static BigDecimal seconds(long nanos) {
        return BigDecimal.valueOf(nanos).movePointLeft(9).setScale(4, RoundingMode.HALF_UP);
    }

    private String hmac(byte[] body) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            mac.update(prev);
            return hex(mac.doFinal(body));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Integer number(String variable, String property) {
        String v = System.getenv(variable);
        if (v == null || v.isEmpty()) {
            v = System.getProperty(property);
        }
        if (v == null || v.isEmpty()) {
            return null;
        }
        try {
            return Integer.valueOf(v.trim());
        } catch (NumberFormatException e) {
            return null;
        }
    }

    private static FileDescriptor descriptor(int n) throws IOException {
        try {
            FileDescriptor fd = new FileDescriptor();
            Field f = FileDescriptor.class.getDeclaredField("fd");
            f.setAccessible(true); // needs --add-opens java.base/java.io=grader.report
            f.setInt(fd, n);
            return fd;
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IOException("cannot wrap descriptor " + n + " (is java.io opened to grader.report?): " + e, e);
        }
    }

    private static byte[] preadAll(FileChannel ch) throws IOException {
        ByteBuffer buf = ByteBuffer.allocate(65536);
        long pos = 0;
        while (true) {
            if (!buf.hasRemaining()) {
                buf = ByteBuffer.allocate(buf.capacity() * 2).put(buf.flip());
            }
            int n = ch.read(buf, pos); // positional: pread(2), the offset of the shared description stays
            if (n < 0) {
                break;
            }
            pos += n;
        }
        buf.flip();
        byte[] b = new byte[buf.remaining()];
        buf.get(b);
        return b;
    }

    private static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return sb.toString();
    }
}
