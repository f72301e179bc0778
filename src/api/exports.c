/* The shared library's own translation unit; the API lives in the archive
 * linked whole, and hetccl.map exports its hetccl* symbols only. */
#include "hetccl/hetccl.h"
