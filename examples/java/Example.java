// agentmem from Java through SQL alone: JDBC (Debian's libpostgresql-jdbc-java), no embedding model
// (messages are stored with embedding => null; agentmem's worker embeds them).
//
//   java -cp /usr/share/java/postgresql.jar Example.java 'jdbc:postgresql://host/db?user=app_login'
//
// The login must be an application role (agentmem.grant_app_role, or
// `agentmem migrate --grant-app-role`) granted the tenant example-java (tenants are bound to logins):
//   select agentmem.grant_tenant(role_name => 'app_login', tenant_id => 'example-java');
// Every unit of work is one transaction that starts
// with set_tenant(..., local => true), as a pooled application must: the tenant ends with the
// transaction, so a pooled connection never carries one request's tenant into the next. Each
// step checks what it prints; any surprise exits non-zero.

import java.sql.Array;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

public class Example {
    static final String TENANT = "example-java";
    static final String MODEL = "nomic-embed-text";
    static final String USER = "alice-" + ProcessHandle.current().pid() + "-" + System.currentTimeMillis();

    interface Work<T> {
        T run(Connection db) throws SQLException;
    }

    static void check(boolean condition, String what) {
        if (!condition) {
            throw new IllegalStateException("unexpected: " + what);
        }
    }

    // Messages are stored with embedding => null: this program has no embedding model. Each is found
    // by words at once, and agentmem queues an embedding job for it in the same transaction;
    // `agentmem worker` (the deployment runs one) embeds it, and then it is found by meaning too.
    //
    // A cache lookup still takes the question's embedding: here every question gets the same unit
    // vector of the model's dimension, so only the exact path means anything. An application with a
    // model of its own passes real vectors there.
    static String placeholderEmbedding(int dimension) {
        StringBuilder b = new StringBuilder("[1");
        for (int i = 1; i < dimension; i++) {
            b.append(",0");
        }
        return b.append(']').toString();
    }

    // One transaction bound to one tenant: BEGIN, set_tenant(local => true), work, COMMIT.
    static <T> T withTenant(Connection db, String tenant, Work<T> work) throws SQLException {
        db.setAutoCommit(false);
        try {
            try (PreparedStatement st = db.prepareStatement(
                    "select agentmem.set_tenant(tenant_id => ?, local => true)")) {
                st.setString(1, tenant);
                st.executeQuery().close();
            }
            T result = work.run(db);
            db.commit();
            return result;
        } catch (SQLException | RuntimeException e) {
            db.rollback();
            throw e;
        } finally {
            db.setAutoCommit(true);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java -cp postgresql.jar Example.java JDBC_URL");
            System.exit(2);
        }
        try (Connection db = DriverManager.getConnection(args[0])) {
            run(db);
            System.out.println("java example: OK");
        } catch (SQLException e) {
            System.err.println("java example FAILED: SQLSTATE " + e.getSQLState() + ": " + e.getMessage());
            System.exit(1);
        } catch (RuntimeException e) {
            System.err.println("java example FAILED: " + e.getMessage());
            System.exit(1);
        }
    }

    static void run(Connection db) throws SQLException {
        int dimension = withTenant(db, TENANT, c -> {
            try (PreparedStatement st = c.prepareStatement("select dimension from agentmem.get_model(model => ?)")) {
                st.setString(1, MODEL);
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    return rs.getInt(1);
                }
            }
        });
        System.out.println("model " + MODEL + ": " + dimension + " dimensions");

        UUID conversation = withTenant(db, TENANT, c -> {
            UUID id;
            try (PreparedStatement st = c.prepareStatement(
                    "select agentmem.start_conversation(user_id => ?, title => ?)")) {
                st.setString(1, USER);
                st.setString(2, "Billing");
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    id = rs.getObject(1, UUID.class);
                }
            }
            String[][] messages = {
                {"user", "Invoice INV-2291 was charged twice"},
                {"assistant", "The duplicate charge on INV-2291 is refunded within 5 days."},
            };
            try (PreparedStatement st = c.prepareStatement(
                    "select * from agentmem.store_message(conversation_id => ?, role => ?, content => ?, "
                    + "embedding => null, model => ?)")) {
                for (String[] m : messages) {
                    st.setObject(1, id);
                    st.setString(2, m[0]);
                    st.setString(3, m[1]);
                    st.setString(4, MODEL);
                    st.executeQuery().close();
                }
            }
            return id;
        });
        System.out.println("conversation " + conversation + ": 2 messages stored without a vector (queued for the worker)");

        List<String> hits = withTenant(db, TENANT, c -> {
            List<String> found = new ArrayList<>();
            try (PreparedStatement st = c.prepareStatement(
                    "select message_index, content from agentmem.search_messages("
                    + "user_id => ?, query_text => ?, k => 5)")) {
                st.setString(1, USER);
                st.setString(2, "charged twice");
                try (ResultSet rs = st.executeQuery()) {
                    while (rs.next()) {
                        found.add("[" + rs.getInt(1) + "] " + rs.getString(2));
                    }
                }
            }
            return found;
        });
        check(!hits.isEmpty() && hits.get(0).equals("[0] Invoice INV-2291 was charged twice"),
              "search by words found " + hits);
        System.out.println("search 'charged twice', at once: " + hits.get(0));

        String question = "How long does a refund of a duplicate charge take?";
        String answer = "A duplicate charge is refunded within 5 days.";
        String cached = withTenant(db, TENANT, c -> {
            try (PreparedStatement st = c.prepareStatement(
                    "select stored, reason from agentmem.cache_store(question => ?, question_embedding => ?::vector, "
                    + "answer => ?, source_ids => ?, model => ?)")) {
                Array sources = c.createArrayOf("text", new String[] {"docs/refunds.md"});
                st.setString(1, question);
                st.setString(2, placeholderEmbedding(dimension));
                st.setString(3, answer);
                st.setArray(4, sources);
                st.setString(5, MODEL);
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    check(rs.getBoolean(1), "cache_store: not stored (" + rs.getString(2) + ")");
                }
            }
            try (PreparedStatement st = c.prepareStatement(
                    "select hit, kind, answer from agentmem.cache_lookup(question => ?, "
                    + "question_embedding => ?::vector, model => ?)")) {
                st.setString(1, question.toLowerCase());
                st.setString(2, placeholderEmbedding(dimension));
                st.setString(3, MODEL);
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    check(rs.getBoolean(1) && "exact".equals(rs.getString(2)),
                          "cache_lookup: hit " + rs.getBoolean(1) + ", kind " + rs.getString(2));
                    return rs.getString(2) + "): " + rs.getString(3);
                }
            }
        });
        check(cached.endsWith(answer), "cached answer " + cached);
        System.out.println("cached answer: hit (" + cached);

        // A transaction that never set a tenant: agentmem refuses with SQLSTATE AM001, never falls back
        // to every tenant.
        String sqlstate = null;
        try (PreparedStatement st = db.prepareStatement("select agentmem.start_conversation(user_id => ?)")) {
            st.setString(1, USER);
            st.executeQuery().close();
        } catch (SQLException e) {
            sqlstate = e.getSQLState();
            System.out.println("without a tenant: SQLSTATE " + sqlstate + ": "
                               + e.getMessage().lines().findFirst().orElse(""));
        }
        check("AM001".equals(sqlstate), "SQLSTATE " + sqlstate + " without a tenant, expected AM001");

        String receipt = withTenant(db, TENANT, c -> {
            try (PreparedStatement st = c.prepareStatement(
                    "select rows_removed, (rows_removed->>'messages')::int, (rows_removed->>'conversations')::int "
                    + "from agentmem.forget_user(user_id => ?)")) {
                st.setString(1, USER);
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    check(rs.getInt(2) == 2 && rs.getInt(3) == 1, "receipt " + rs.getString(1));
                    return rs.getString(1);
                }
            }
        });
        System.out.println("forget_user: receipt " + receipt);
    }
}
