// Run at image build: the JVM's truststore (ca-certificates-java, from /etc/ssl/certs) accepts
// Maven Central's certificate, also behind a TLS-intercepting proxy whose CA is in grader-ca.crt.
public class TlsCheck {
    public static void main(String[] args) throws Exception {
        var c = (java.net.HttpURLConnection) java.net.URI.create(args[0]).toURL().openConnection();
        c.setRequestMethod("HEAD");
        System.out.println("TLS ok: " + args[0] + " -> HTTP " + c.getResponseCode());
    }
}
