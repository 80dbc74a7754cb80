#if canImport(Glibc)
import Glibc
#endif

exit(Modelc.run(Array(CommandLine.arguments.dropFirst())).rawValue)
