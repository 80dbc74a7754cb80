/* A program of the C interface's users, built against an installed modelc with pkg-config
 * (Tests/Install/test-install.sh): one prediction of an ML program, its outputs printed.
 *   predict MODEL  →  "probs 0.31535 0.44750 0.16192 0.07523" */
#include <modelc.h>
#include <stdio.h>

static int fail(const char *what) {
    fprintf(stderr, "predict: %s: %s\n", what, modelc_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: predict MODEL\n");
        return 64;
    }
    if (modelc_abi_version() != MODELC_ABI_VERSION) {
        fprintf(stderr, "predict: the library's C interface is %d, the header's %d\n", modelc_abi_version(),
                MODELC_ABI_VERSION);
        return 1;
    }
    modelc_model *model = NULL;
    if (modelc_open(argv[1], 1, &model) != MODELC_OK) return fail("open");
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = (float)(i + 1);
    const int64_t shape[] = {1, 16};
    modelc_features *inputs = modelc_features_new();
    if (modelc_features_add_array(inputs, "x", MODELC_FLOAT32, shape, 2, x) != MODELC_OK) return fail("input");
    modelc_features *outputs = NULL;
    if (modelc_predict(model, inputs, NULL, &outputs) != MODELC_OK) return fail("predict");
    for (size_t index = 0; index < modelc_features_count(outputs); index++) {
        int32_t type = 0, rank = 0;
        const int64_t *dimensions = NULL;
        const void *data = NULL;
        if (modelc_features_get_array(outputs, index, &type, &rank, &dimensions, &data) != MODELC_OK) continue;
        int64_t count = 1;
        for (int32_t axis = 0; axis < rank; axis++) count *= dimensions[axis];
        printf("%s", modelc_features_name(outputs, index));
        for (int64_t i = 0; i < count && type == MODELC_FLOAT32; i++) printf(" %.5f", ((const float *)data)[i]);
        printf("\n");
    }
    modelc_features_free(outputs);
    modelc_features_free(inputs);
    modelc_close(model);
    return 0;
}
