// Test oracle: Kafka's own AdminUtils.assignReplicasToBrokers (kafka-server-common 3.9.1).
// Reads one case per line from stdin:  brokers racks partitions rf startIndex startPartition
// (brokers "0,1,4,2,3"; racks "-" or "a,b,a,..." aligned with brokers) and prints one line per
// case: "p=r1,r2;p=..." in partition order, or "ERROR <message>". Run with the source launcher:
//   java -cp '.cache/jars/kafka/*' tests/java/AssignOracle.java
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.kafka.admin.AdminUtils;
import org.apache.kafka.admin.BrokerMetadata;

public class AssignOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            String[] ids = f[0].split(",");
            String[] racks = f[1].equals("-") ? null : f[1].split(",");
            List<BrokerMetadata> brokers = new ArrayList<>();
            for (int i = 0; i < ids.length; i++) {
                brokers.add(new BrokerMetadata(Integer.parseInt(ids[i]),
                        racks == null ? Optional.empty() : Optional.of(racks[i])));
            }
            try {
                Map<Integer, List<Integer>> a = AdminUtils.assignReplicasToBrokers(brokers,
                        Integer.parseInt(f[2]), Integer.parseInt(f[3]), Integer.parseInt(f[4]), Integer.parseInt(f[5]));
                StringBuilder out = new StringBuilder();
                for (Map.Entry<Integer, List<Integer>> e : new TreeMap<>(a).entrySet()) {
                    if (out.length() > 0) out.append(';');
                    out.append(e.getKey()).append('=');
                    List<Integer> r = e.getValue();
                    for (int j = 0; j < r.size(); j++) out.append(j == 0 ? "" : ",").append(r.get(j));
                }
                System.out.println(out);
            } catch (Exception e) {
                System.out.println("ERROR " + e.getMessage());
            }
        }
    }
}
