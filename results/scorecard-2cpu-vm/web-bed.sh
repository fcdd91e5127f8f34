# Sourced by web-manual.sh and web-agents-ab.sh: a docker testbed $name, one
# container a host, the sending host's wire RPS'd to CPU 0 as the bench does
# (PIN=0: not), and nginx (one worker, on CPU 1) serving a 1 KiB file from
# $d at http://$dst:8080/f. Needs B (falcon-lab), name and d; sets h1, h2,
# c1, c2 and dst.
$B testbed up --layout docker --name $name --containers 1 >/dev/null
h1=fb-$name-h1 h2=fb-$name-h2 c1=fb-$name-h1-c0 c2=fb-$name-h2-c0
nic=$(ip -n $h1 -o link show | awk -F': ' '$2 ~ /^eth0/ {print $2}' | cut -d@ -f1)
[ "${PIN:-1}" = 0 ] || ip netns exec $h1 sh -c "echo 1 >/sys/class/net/$nic/queues/rx-0/rps_cpus"
dst=$(ip -n $c2 -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
mkdir -p $d/www; head -c 1024 /dev/urandom > $d/www/f
cat > $d/nginx.conf <<C
daemon on; master_process on; user root; worker_processes 1; pid $d/nginx.pid; error_log stderr warn;
events { worker_connections 4096; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000; default_type application/octet-stream;
client_body_temp_path $d/cb; proxy_temp_path $d/px; fastcgi_temp_path $d/fc; uwsgi_temp_path $d/uw; scgi_temp_path $d/sc;
server { listen $dst:8080; root $d/www; } }
C
ip netns exec $c2 taskset -c 1 nginx -p $d/ -c $d/nginx.conf -e stderr
