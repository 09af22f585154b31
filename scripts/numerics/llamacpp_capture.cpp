// llamacpp_capture: teacher-force tokens through llama.cpp and write every position's logits
// and the residual stream after each layer (llama.cpp's `l_out-N` graph tensors) for
// scripts/numerics/llamacpp_to_dump.py.
//
//   llamacpp-capture MODEL.gguf TOKENS OUT.gscap [--no-hidden] [-t THREADS] [-ngl N]
//
// TOKENS: a text file of integer token ids (any separators: "1 2 3", "[1, 2, 3]", one a line).
// The tokens are fed as they are (no BOS is added): put the BOS in the file if the model
// wants one. One llama_decode of all tokens, one micro-batch (n_batch = n_ubatch = T), every
// position's logits requested; the eval callback (the one llama-eval-callback uses,
// llama_context_params.cb_eval) copies each `l_out-N` tensor to host memory as float32.
//
// Output (little-endian):
//   char[8] "GSLCAP01"; uint32 n_tokens T, n_vocab V, n_embd H, n_hidden_layers L, desc_len;
//   char desc[desc_len] (llama_model_desc); int32 tokens[T]; float32 logits[T][V];
//   then for N in 0..L-1: float32 hidden_N[T][H]   (the residual stream after layer N).
//
// Build against a llama.cpp build tree (CPU or GPU; see docs/NUMERICS.md):
//   c++ -O2 -std=c++17 -I$LLAMA/include -I$LLAMA/ggml/include llamacpp_capture.cpp
//       $BUILD/src/libllama.a $BUILD/ggml/src/libggml.a $BUILD/ggml/src/libggml-cpu.a
//       $BUILD/ggml/src/libggml-base.a -fopenmp -lpthread -ldl -o llamacpp-capture
// (one command line)
// (a shared build: -L$BUILD/bin -lllama -lggml -lggml-base instead of the .a files).

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

struct capture {
    int64_t n_tokens = 0;
    int64_t n_embd = 0;
    std::map<int, std::vector<float>> layers;  // l_out-N → [T][H] float32
    std::string error;
};

static bool layer_of(const char * name, int * il) {
    if (std::strncmp(name, "l_out-", 6) != 0) {
        return false;
    }
    char * end = nullptr;
    long v = std::strtol(name + 6, &end, 10);
    if (end == name + 6 || *end != '\0') {
        return false;
    }
    *il = (int) v;
    return true;
}

static bool eval_cb(struct ggml_tensor * t, bool ask, void * user_data) {
    auto * cap = (capture *) user_data;
    int il = -1;
    if (!layer_of(ggml_get_name(t), &il)) {
        return ask ? false : true;  // not asked for: keep computing
    }
    if (ask) {
        return true;  // yes, show me this tensor's data once computed
    }
    if (t->ne[0] != cap->n_embd || t->ne[1] != cap->n_tokens || t->ne[2] != 1 || t->ne[3] != 1 ||
        !ggml_is_contiguous(t)) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s has shape [%lld, %lld, %lld, %lld]; [%lld, %lld] expected",
                      ggml_get_name(t), (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2],
                      (long long) t->ne[3], (long long) cap->n_embd, (long long) cap->n_tokens);
        cap->error = buf;
        return false;
    }
    const int64_t n = cap->n_tokens * cap->n_embd;
    std::vector<float> out(n);
    std::vector<uint8_t> raw(ggml_nbytes(t));
    ggml_backend_tensor_get(t, raw.data(), 0, raw.size());  // host or device memory alike
    switch (t->type) {
        case GGML_TYPE_F32: std::memcpy(out.data(), raw.data(), n * sizeof(float)); break;
        case GGML_TYPE_F16: ggml_fp16_to_fp32_row((const ggml_fp16_t *) raw.data(), out.data(), n); break;
        case GGML_TYPE_BF16: ggml_bf16_to_fp32_row((const ggml_bf16_t *) raw.data(), out.data(), n); break;
        default:
            cap->error = std::string(ggml_get_name(t)) + " is " + ggml_type_name(t->type) + ", not f32/f16/bf16";
            return false;
    }
    if (cap->layers.count(il)) {
        cap->error = std::string(ggml_get_name(t)) + " seen twice (more than one micro-batch?)";
        return false;
    }
    cap->layers[il] = std::move(out);
    return true;
}

static void put_u32(std::ofstream & f, uint32_t v) { f.write((const char *) &v, 4); }

int main(int argc, char ** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s MODEL.gguf TOKENS OUT.gscap [--no-hidden] [-t THREADS] [-ngl N]\n", argv[0]);
        return 2;
    }
    const char * model_path = argv[1];
    const char * tokens_path = argv[2];
    const char * out_path = argv[3];
    bool hidden = true;
    int threads = 0;
    int ngl = -1;
    for (int i = 4; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--no-hidden") {
            hidden = false;
        } else if (a == "-t" && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
        } else if (a == "-ngl" && i + 1 < argc) {
            ngl = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "error: unknown argument %s\n", a.c_str());
            return 2;
        }
    }

    std::vector<llama_token> tokens;
    {
        std::ifstream f(tokens_path);
        if (!f) {
            std::fprintf(stderr, "error: cannot read %s\n", tokens_path);
            return 1;
        }
        std::stringstream ss;
        ss << f.rdbuf();
        std::string s = ss.str();
        for (char & c : s) {
            if (!(c == '-' || (c >= '0' && c <= '9'))) {
                c = ' ';
            }
        }
        std::istringstream is(s);
        long long v;
        while (is >> v) {
            tokens.push_back((llama_token) v);
        }
    }
    if (tokens.size() < 2) {
        std::fprintf(stderr, "error: %s holds %zu tokens; at least 2 needed\n", tokens_path, tokens.size());
        return 1;
    }

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    if (ngl >= 0) {
        mp.n_gpu_layers = ngl;
    }
    llama_model * model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        std::fprintf(stderr, "error: cannot load %s\n", model_path);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int64_t T = (int64_t) tokens.size();
    const int64_t V = llama_vocab_n_tokens(vocab);
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] < 0 || tokens[i] >= V) {
            std::fprintf(stderr, "error: token %d at position %zu is outside the vocabulary (%lld)\n", tokens[i], i,
                         (long long) V);
            return 1;
        }
    }

    capture cap;
    cap.n_tokens = T;
    cap.n_embd = llama_model_n_embd(model);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) T;
    cp.n_batch = (uint32_t) T;
    cp.n_ubatch = (uint32_t) T;  // one micro-batch: each l_out-N is seen once, with every row
    cp.n_seq_max = 1;
    if (threads > 0) {
        cp.n_threads = threads;
        cp.n_threads_batch = threads;
    }
    if (hidden) {
        cp.cb_eval = eval_cb;
        cp.cb_eval_user_data = &cap;
    }
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        std::fprintf(stderr, "error: cannot create a context of %lld tokens\n", (long long) T);
        return 1;
    }

    llama_batch batch = llama_batch_init((int32_t) T, 0, 1);
    for (int64_t i = 0; i < T; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = (llama_pos) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;  // every position's logits
    }
    batch.n_tokens = (int32_t) T;
    if (llama_decode(ctx, batch) != 0) {
        std::fprintf(stderr, "error: llama_decode failed%s%s\n", cap.error.empty() ? "" : ": ", cap.error.c_str());
        return 1;
    }
    if (!cap.error.empty()) {
        std::fprintf(stderr, "error: %s\n", cap.error.c_str());
        return 1;
    }
    const int64_t L = hidden ? (int64_t) cap.layers.size() : 0;
    for (int64_t il = 0; il < L; ++il) {
        if (!cap.layers.count((int) il)) {
            std::fprintf(stderr, "error: l_out-%lld was never computed (layers seen: %lld)\n", (long long) il,
                         (long long) L);
            return 1;
        }
    }
    if (hidden && L != llama_model_n_layer(model)) {
        std::fprintf(stderr, "warning: %lld l_out tensors for %d layers\n", (long long) L, llama_model_n_layer(model));
    }

    char desc[256] = {0};
    llama_model_desc(model, desc, sizeof desc);
    std::ofstream f(out_path, std::ios::binary);
    f.write("GSLCAP01", 8);
    put_u32(f, (uint32_t) T);
    put_u32(f, (uint32_t) V);
    put_u32(f, (uint32_t) cap.n_embd);
    put_u32(f, (uint32_t) L);
    put_u32(f, (uint32_t) std::strlen(desc));
    f.write(desc, std::strlen(desc));
    f.write((const char *) tokens.data(), T * sizeof(int32_t));
    for (int64_t i = 0; i < T; ++i) {
        const float * row = llama_get_logits_ith(ctx, (int32_t) i);
        if (!row) {
            std::fprintf(stderr, "error: no logits for position %lld\n", (long long) i);
            return 1;
        }
        f.write((const char *) row, V * sizeof(float));
    }
    for (int64_t il = 0; il < L; ++il) {
        const auto & h = cap.layers[(int) il];
        f.write((const char *) h.data(), h.size() * sizeof(float));
    }
    f.close();
    if (!f) {
        std::fprintf(stderr, "error: cannot write %s\n", out_path);
        return 1;
    }
    std::fprintf(stderr, "%s: %lld tokens, vocabulary %lld, %lld layers of width %lld (%s)\n", out_path,
                 (long long) T, (long long) V, (long long) L, (long long) cap.n_embd, desc);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
