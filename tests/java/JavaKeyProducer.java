// The key placement test's Java producer (tests/integration/brokers/brokers_real/kafka_keys.rs):
// Apache Kafka's own client with its default partitioner (murmur2 of the key), run with
// `java -cp "$QM_TEST_APACHE_KAFKA_LIB/*" JavaKeyProducer.java BOOTSTRAP TOPIC KEY...`.
// It writes one record per key and prints `KEY PARTITION` for each, as the broker confirmed it.
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class JavaKeyProducer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", "all");
        p.put("delivery.timeout.ms", "20000");
        p.put("request.timeout.ms", "10000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 2; i < args.length; i++) {
                RecordMetadata m = producer.send(new ProducerRecord<>(args[1], args[i], "java")).get();
                System.out.println(args[i] + " " + m.partition());
            }
        }
    }
}
