// oneDNN (Debian libdnnl-dev): the network runtime's convolutions. Its
// kernels are generated at run time for the processor in use (AVX2, AVX-512…),
// so they do not depend on how the distribution compiled the library.
#include <dnnl.h>
