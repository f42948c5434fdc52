package epochgate.spark;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * A driver plugin that takes YARN's defaults out of the driver's Hadoop configuration.
 *
 * <p>The first Spark write loads Hadoop's {@code JobConf}, which adds {@code yarn-default.xml}
 * (and {@code mapred-default.xml}) to the defaults of every Hadoop configuration: about 530 of
 * the session's 1,100 settings. A write serializes the whole configuration into each of its
 * tasks, and each task reads it back, which is a large part of what a small write costs. No YARN
 * code runs on a master whose executors are in the driver's JVM, so the plugin removes every
 * setting whose only source is {@code yarn-default.xml}: a setting the user gave ({@code
 * spark.hadoop.yarn.*}, a {@code yarn-site.xml}) stays.
 *
 * <p>A class that adds a default resource makes every configuration read its resources again,
 * the dropped defaults with them: the plugin first loads those a write loads ({@code JobConf},
 * and {@code HdfsConfiguration}, which the file systems' service lookup loads).
 */
public class HadoopDefaults implements SparkPlugin {
  /** Where the defaults dropped come from. */
  public static final String YARN_DEFAULTS = "yarn-default.xml";

  /** The classes that add default resources as they load, loaded before the drop. */
  private static final String[] ADDING_DEFAULTS = {
    "org.apache.hadoop.mapred.JobConf", "org.apache.hadoop.hdfs.HdfsConfiguration",
  };

  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public Map<String, String> init(SparkContext sc, PluginContext context) {
        drop(sc.hadoopConfiguration());
        return Collections.emptyMap();
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return null;
  }

  /** Remove from {@code conf} every setting that only {@code yarn-default.xml} gave. */
  public static int drop(Configuration conf) {
    for (String name : ADDING_DEFAULTS) {
      try {
        Class.forName(name, true, Configuration.class.getClassLoader());
      } catch (ClassNotFoundException absent) {
        // not on the class path: it adds nothing
      }
    }
    List<String> keys = new ArrayList<>();
    for (Map.Entry<String, String> setting : conf) {
      String[] sources = conf.getPropertySources(setting.getKey());
      if (sources != null && sources.length > 0 && onlyYarnDefaults(sources)) {
        keys.add(setting.getKey());
      }
    }
    for (String key : keys) {
      conf.unset(key);
    }
    return keys.size();
  }

  private static boolean onlyYarnDefaults(String[] sources) {
    for (String source : sources) {
      if (!YARN_DEFAULTS.equals(source)) {
        return false;
      }
    }
    return true;
  }
}
