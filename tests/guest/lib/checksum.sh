# The checksum workload through a mounted file system (cifs.ko), for busybox sh in the
# RDMA test guest; the same shape as smbx's examples/checksum: create a file, write at
# random offsets with random sizes from 1 byte to 8 MiB, read back at random offsets
# comparing SHA-256 with a local model of the file, check the whole file, rename it,
# delete it.
#
#   checksum_fs DIR [TOTAL_BYTES [SPAN]]     (defaults 16 MiB written and read, span 12 MiB)
#
# Prints "checksum: ..." and returns 0, or prints what failed and returns 1.

# A size with an optional K or M suffix, in bytes.
size_bytes() {
    case $1 in
        *K) echo $(( ${1%K} * 1024 )) ;;
        *M) echo $(( ${1%M} * 1048576 )) ;;
        *) echo $(( $1 )) ;;
    esac
}

# A random integer in 0..=$1 (up to 2^45).
_rand() {
    echo $(( ((RANDOM << 30) | (RANDOM << 15) | RANDOM) % ($1 + 1) ))
}

# 1..=8 MiB: half uniform, half log-uniform (as the smbx workload).
_size() {
    if [ $((RANDOM & 1)) = 0 ]; then
        echo $(( $(_rand $((8388608 - 1))) + 1 ))
    else
        b=$(( RANDOM % 24 ))
        lo=$((1 << b)); hi=$((2 << b)); [ $hi -gt 8388608 ] && hi=8388608
        echo $(( lo + $(_rand $((hi - lo))) ))
    fi
}

_put() { # src srcoff dst dstoff len
    dd if="$1" of="$3" bs=1M iflag=skip_bytes,count_bytes,fullblock oflag=seek_bytes \
        conv=notrunc skip="$2" seek="$4" count="$5" 2>/dev/null
}

_sum() { # file off len
    dd if="$1" bs=1M iflag=skip_bytes,count_bytes,fullblock skip="$2" count="$3" 2>/dev/null \
        | sha256sum | cut -d' ' -f1
}

checksum_fs() {
    dir=$1; total=${2:-16777216}; span=${3:-12582912}
    pool=/tmp/checksum-pool; model=/tmp/checksum-model
    [ -s $pool ] || dd if=/dev/urandom of=$pool bs=1M count=8 2>/dev/null
    f="$dir/checksum-$$-$RANDOM"
    rm -f $model; : >$model
    : >"$f" || { echo "checksum: FAILED: create $f"; return 1; }
    written=0; writes=0; end=0
    while [ $written -lt $total ]; do
        n=$(_size); [ $n -gt $span ] && n=$span
        off=$(_rand $((span - n))); src=$(_rand $((8388608 - n)))
        _put $pool $src "$f" $off $n || { echo "checksum: FAILED: write $n at $off"; return 1; }
        _put $pool $src $model $off $n
        [ $((off + n)) -gt $end ] && end=$((off + n))
        written=$((written + n)); writes=$((writes + 1))
    done
    size=$(stat -c %s "$f")
    [ "$size" = $end ] || { echo "checksum: FAILED: size $size, want $end"; return 1; }
    read=0; reads=0
    while [ $read -lt $total ]; do
        n=$(_size); [ $n -gt $end ] && n=$end
        off=$(_rand $((end - n)))
        [ "$(_sum "$f" $off $n)" = "$(_sum $model $off $n)" ] \
            || { echo "checksum: FAILED: read $n at $off: SHA-256 differs"; return 1; }
        read=$((read + n)); reads=$((reads + 1))
    done
    want=$(sha256sum <$model | cut -d' ' -f1)
    [ "$(sha256sum <"$f" | cut -d' ' -f1)" = "$want" ] \
        || { echo "checksum: FAILED: whole file differs"; return 1; }
    mv "$f" "$f.renamed" || { echo "checksum: FAILED: rename"; return 1; }
    [ ! -e "$f" ] && [ "$(sha256sum <"$f.renamed" | cut -d' ' -f1)" = "$want" ] \
        || { echo "checksum: FAILED: after the rename"; return 1; }
    rm "$f.renamed" && [ ! -e "$f.renamed" ] || { echo "checksum: FAILED: delete"; return 1; }
    echo "checksum: $writes write(s) of $written bytes, $reads read(s) of $read bytes, file $end bytes, sha256 $want, renamed and deleted"
}
