// The test KDC: `java -cp <kerby jars> Kdc.java <work dir> <realm> <port> <principal>=<keytab file>...`
// (Java's single-file source launcher; no build). Creates each principal with a random key, writes its keytab,
// prints READY and serves on 127.0.0.1:<port> over TCP until killed. Tickets as short as a client asks for (1 s+).
import java.io.File;
import org.apache.kerby.kerberos.kerb.server.KdcConfigKey;
import org.apache.kerby.kerberos.kerb.server.SimpleKdcServer;

public class Kdc {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        SimpleKdcServer kdc = new SimpleKdcServer();
        kdc.setWorkDir(dir);
        kdc.setKdcHost("127.0.0.1");
        kdc.setKdcRealm(args[1]);
        kdc.setKdcTcpPort(Integer.parseInt(args[2]));
        kdc.setAllowUdp(false);
        // Kerby refuses tickets shorter than an hour by default; a test asks for seconds to see them renewed.
        kdc.getKdcConfig().setLong(KdcConfigKey.MINIMUM_TICKET_LIFETIME, 1L);
        kdc.init();
        kdc.start();
        for (int i = 3; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            kdc.createPrincipal(pair[0]);
            kdc.exportPrincipal(pair[0], new File(dir, pair[1]));
        }
        System.out.println("READY");
        System.out.flush();
        Thread.currentThread().join();
    }
}
