#version 450
// dst row i = the table's row tokens[i], dequantized (F32, F16, Q8_0, Q4_0; ggml's layouts).
// The table is read as 32-bit words at byte offsets.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer D { float d[]; };
layout(std430, binding = 1) readonly buffer T { uint w[]; };
layout(std430, binding = 2) readonly buffer I { int st[]; };
layout(push_constant) uniform P { uint ncols, od, sd, row_bytes, type, otok; } p;
uint byte_at(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
float half_at(uint b) { return unpackHalf2x16((w[b >> 2] >> ((b & 2u) * 8u)) & 0xFFFFu).x; }
void main() {
    uint c = gl_GlobalInvocationID.x, i = gl_WorkGroupID.y;
    if (c >= p.ncols) return;
    uint row = uint(st[p.otok + i]) * p.row_bytes;
    float v;
    if (p.type == 0u) v = uintBitsToFloat(w[(row >> 2) + c]);
    else if (p.type == 1u) v = half_at(row + 2u * c);
    else if (p.type == 8u) {                       // Q8_0: f16 scale, 32 int8
        uint blk = row + (c / 32u) * 34u;
        int q = int(byte_at(blk + 2u + c % 32u));
        v = half_at(blk) * float(q >= 128 ? q - 256 : q);
    } else {                                       // Q4_0: f16 scale, 16 bytes of nibbles
        uint blk = row + (c / 32u) * 18u, j = c % 32u;
        uint q = byte_at(blk + 2u + (j & 15u));
        v = half_at(blk) * (float(j < 16u ? (q & 15u) : (q >> 4)) - 8.0);
    }
    d[p.od + i * p.sd + c] = v;
}
